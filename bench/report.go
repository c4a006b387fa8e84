package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// rowKind says how a row's samples are summarised and compared.
type rowKind int

const (
	// latencyRow: durations in ms; median and p99; ratio start-dev ÷ ours.
	latencyRow rowKind = iota
	// rateRow: one rate per round; median and the worst (lowest) round; ratio ours ÷ start-dev,
	// so that, as in every other row, a ratio above 1 means ours is better.
	rateRow
	// valueRow: one measurement per server, shown in the median column; ratio start-dev ÷ ours.
	valueRow
)

// row is one line of the report: a workload's samples per server.
type row struct {
	label  string
	kind   rowKind
	unit   string
	values map[string][]float64 // by server name
}

// report collects rows in the order they were declared.
type report struct {
	rows    []*row
	servers []string // the servers measured, in column order
}

// declare adds an empty row; rows print in declaration order.
func (r *report) declare(label string, kind rowKind, unit string) *row {
	rw := &row{label: label, kind: kind, unit: unit, values: map[string][]float64{}}
	r.rows = append(r.rows, rw)
	return rw
}

// add records samples of server for rw.
func (rw *row) add(server string, v ...float64) {
	rw.values[server] = append(rw.values[server], v...)
}

// summary returns the row's two statistics for server (median and p99, or median and worst
// round, or the value and NaN) and the sample count; ok is false without samples.
func (rw *row) summary(server string) (mid, tail float64, n int, ok bool) {
	xs := rw.values[server]
	if len(xs) == 0 {
		return 0, 0, 0, false
	}
	switch rw.kind {
	case latencyRow:
		return median(xs), percentile(xs, 0.99), len(xs), true
	case rateRow:
		return median(xs), slices.Min(xs), len(xs), true
	default:
		return median(xs), math.NaN(), len(xs), true
	}
}

// max returns the largest latency sample of server, NaN for other kinds of row: where stalls
// show.
func (rw *row) max(server string) float64 {
	if xs := rw.values[server]; rw.kind == latencyRow && len(xs) > 0 {
		return slices.Max(xs)
	}
	return math.NaN()
}

// ratio returns how many times better ours is than start-dev on this row (>1: ours better),
// for the median and the tail statistic.
func (rw *row) ratio() (mid, tail float64, ok bool) {
	om, ot, _, ok1 := rw.summary(serverOurs)
	sm, st, _, ok2 := rw.summary(serverStartDev)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	if rw.kind == rateRow {
		return om / sm, ot / st, true
	}
	return sm / om, st / ot, true
}

// median returns the middle of xs (the mean of the two middles for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the nearest-rank p-quantile of xs (0 < p ≤ 1): the smallest sample with
// at least p of the samples at or below it.
func percentile(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// formatValue prints v with its unit and a precision that suits its size.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return ""
	}
	prec := 1
	if math.Abs(v) >= 1000 {
		prec = 0
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

func formatRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

// writeTable prints the report as a Markdown table.
func (r *report) writeTable(w io.Writer) {
	both := slices.Contains(r.servers, serverOurs) && slices.Contains(r.servers, serverStartDev)
	head := []string{"workload"}
	for _, s := range r.servers {
		head = append(head, s+" median", s+" p99", s+" max")
	}
	if both {
		head = append(head, "start-dev ÷ ours (median)", "(p99)")
	}
	head = append(head, "n")
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---:"
	}
	sep[0] = "---"
	fmt.Fprintln(w, "|"+strings.Join(sep, "|")+"|")

	for _, rw := range r.rows {
		cells := []string{rw.label}
		var counts []string
		for _, s := range r.servers {
			mid, tail, n, ok := rw.summary(s)
			if !ok {
				cells = append(cells, "", "", "")
				counts = append(counts, "0")
				continue
			}
			cells = append(cells, formatValue(mid, rw.unit), formatValue(tail, rw.unit), formatValue(rw.max(s), rw.unit))
			counts = append(counts, strconv.Itoa(n))
		}
		if both {
			mid, tail, ok := rw.ratio()
			if !ok {
				cells = append(cells, "", "")
			} else {
				cells = append(cells, formatRatio(mid), formatRatio(tail))
			}
		}
		cells = append(cells, strings.Join(counts, " / "))
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
}

// goal is one of the acceptance criteria, checked against a row.
type goal struct {
	what  string
	check func() (got string, met bool, ok bool)
}

// writeGoals prints each goal as met or MISSED with the measured value.
func writeGoals(w io.Writer, goals []goal) {
	for _, g := range goals {
		got, met, ok := g.check()
		switch {
		case !ok:
			fmt.Fprintf(w, "- %s: not measured\n", g.what)
		case met:
			fmt.Fprintf(w, "- %s: **met** (%s)\n", g.what, got)
		default:
			fmt.Fprintf(w, "- %s: **MISSED** (%s)\n", g.what, got)
		}
	}
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// cpuTimes is the machine-wide CPU time from /proc/stat, in clock ticks.
type cpuTimes struct{ busy, total int64 }

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var t cpuTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseInt(s, 10, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busyPercent returns the share of all CPUs that was busy between a and b.
func busyPercent(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return math.NaN()
	}
	return 100 * float64(b.busy-a.busy) / float64(b.total-a.total)
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
