package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMedianAndPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted on purpose
	}
	tests := []struct {
		name       string
		xs         []float64
		wantMedian float64
		wantP99    float64
	}{
		{"one sample", []float64{7}, 7, 7},
		{"odd count", []float64{3, 1, 2}, 2, 3},
		{"even count averages the middles", []float64{4, 1, 3, 2}, 2.5, 4},
		{"p99 of 100 is the 99th, not the maximum", hundred, 50.5, 99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.xs); got != tt.wantMedian {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.wantMedian)
			}
			if got := percentile(tt.xs, 0.99); got != tt.wantP99 {
				t.Errorf("percentile(%v, 0.99) = %v, want %v", tt.xs, got, tt.wantP99)
			}
		})
	}
}

func TestRowRatioMeansOursBetterAboveOne(t *testing.T) {
	r := &report{servers: []string{serverOurs, serverStartDev}}
	lat := r.declare("latency", latencyRow, "ms")
	lat.add(serverOurs, 10, 10, 10)
	lat.add(serverStartDev, 50, 50, 50)
	rate := r.declare("rate", rateRow, "wf/s")
	rate.add(serverOurs, 60, 40)
	rate.add(serverStartDev, 10, 10)

	if got, _, _ := lat.ratio(); got != 5 {
		t.Errorf("latency ratio = %v, want 5 (start-dev ÷ ours)", got)
	}
	if got, worst, _ := rate.ratio(); got != 5 || worst != 4 {
		t.Errorf("rate ratio = %v (worst %v), want 5 (worst 4) (ours ÷ start-dev)", got, worst)
	}

	var buf bytes.Buffer
	r.writeTable(&buf)
	for _, want := range []string{"| latency | 10.0 ms | 10.0 ms | 10.0 ms | 50.0 ms | 50.0 ms | 50.0 ms | 5.00× | 5.00× | 3 / 3 |",
		"| rate | 50.0 wf/s | 40.0 wf/s |  | 10.0 wf/s | 10.0 wf/s |  | 5.00× | 4.00× | 2 / 2 |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestParseDynamicValue(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"true", true},
		{"20", 20},
		{"500ms", 500 * time.Millisecond},
		{"0.5", 0.5},
		{"sqlite", "sqlite"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := parseDynamicValue(tt.in); got != tt.want {
				t.Errorf("parseDynamicValue(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFindTemporalNamesTheInstallCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findTemporal("", t.TempDir())
	if err == nil {
		t.Fatal("findTemporal found a CLI in an empty PATH and GOPATH")
	}
	if !strings.Contains(err.Error(), temporalInstall) {
		t.Errorf("error %q does not name %q", err, temporalInstall)
	}
}

// TestQuickstartSaysHowToGetTheTemporalCLI: the README's Quickstart gives the same install
// command as the benchmark's hint, so the two cannot disagree on the version.
func TestQuickstartSaysHowToGetTheTemporalCLI(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, _ := strings.Cut(string(b), "\n## Quickstart\n")
	quick, _, _ = strings.Cut(quick, "\n## ")
	if !strings.Contains(quick, "`"+temporalInstall+"`") || !strings.Contains(quick, "need the `temporal` CLI") {
		t.Errorf("README's Quickstart does not give %q or does not say starter needs no temporal CLI", temporalInstall)
	}
}

func TestParseTracingFlags(t *testing.T) {
	f, err := parseTracingFlags(nil)
	if err != nil || f.runs != 20 || f.rounds != 5 || f.warmup != 3 {
		t.Errorf("defaults = %+v (%v), want 20 runs, 5 rounds, 3 warm-up", f, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs and --rounds must be >= 1"},
		{[]string{"--warmup", "-1"}, "--warmup >= 0"},
		{[]string{"fast"}, `unexpected argument "fast"`},
	} {
		if _, err := parseTracingFlags(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseTracingFlags(%q) = %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}
