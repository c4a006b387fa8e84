package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoNetns: isolated workers need root and iproute2's `ip netns`.
var ErrNoNetns = errors.New("cluster: isolated workers need root and iproute2 (`ip netns`)")

// NetnsSupported reports whether AddIsolatedWorker can work here: root, `ip` installed and
// `ip netns list` answering.
func NetnsSupported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrNoNetns)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	if out, err := exec.Command(ip, "netns", "list").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: ip netns list: %v %s", ErrNoNetns, err, out)
	}
	return nil
}

// netns is a network namespace with a veth pair to the host: the host side holds hostIP, the
// namespace side nsIP (one /30 of 10.213.0.0/16). Loopback services of the host the worker
// needs (the model) are forwarded from hostIP:port, so they go through the veth too.
type netns struct {
	name, hostIf, nsIf string
	hostIP, nsIP       string
	config             string // the worker's nexo.yaml, loopback ports rewritten ("" when none)

	mu  sync.Mutex
	lns []net.Listener
}

var netnsSeq atomic.Int32

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns creates the namespace, the veth pair (lo and both ends up) and the forwarders.
func newNetns(forward []int) (_ *netns, err error) {
	pid := os.Getpid()
	var n *netns
	for range 64 {
		seq := int(netnsSeq.Add(1))
		idx := ((pid%1024)*64 + seq%64) % 16384
		a := idx * 4
		host := fmt.Sprintf("10.213.%d.%d", a>>8, a&255+1)
		// A /30 some other cluster (or anything else) holds is skipped.
		if out, _ := exec.Command("ip", "-4", "-o", "addr", "show", "to", host+"/30").Output(); len(strings.TrimSpace(string(out))) > 0 {
			continue
		}
		n = &netns{
			name:   fmt.Sprintf("nexo-%d-%d", pid, seq),
			hostIf: fmt.Sprintf("nx%dh%d", pid%10000000, seq%1000),
			nsIf:   fmt.Sprintf("nx%dn%d", pid%10000000, seq%1000),
			hostIP: host,
			nsIP:   fmt.Sprintf("10.213.%d.%d", a>>8, a&255+2),
		}
		break
	}
	if n == nil {
		return nil, errors.New("cluster: no free /30 in 10.213.0.0/16 for a network namespace")
	}
	if err := ipCmd("netns", "add", n.name); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.remove()
		}
	}()
	for _, args := range [][]string{
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", n.nsIf},
		{"-n", n.name, "link", "set", n.nsIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return nil, err
		}
	}
	for _, port := range forward {
		l, err := net.Listen("tcp", net.JoinHostPort(n.hostIP, strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("forward %s:%d to the host's loopback: %w", n.hostIP, port, err)
		}
		n.lns = append(n.lns, l)
		go forwardTo(l, "127.0.0.1:"+strconv.Itoa(port))
	}
	return n, nil
}

// forwardTo copies every connection l accepts to and from target.
func forwardTo(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer out.Close()
			go func() { _, _ = io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(in, out)
		}()
	}
}

// remove deletes the veth pair (both ends go with the host one) and the namespace, and
// closes the forwarders.
func (n *netns) remove() {
	n.mu.Lock()
	for _, l := range n.lns {
		l.Close()
	}
	n.lns = nil
	n.mu.Unlock()
	_ = ipCmd("link", "del", n.hostIf)
	_ = ipCmd("netns", "del", n.name)
}

// AddIsolatedWorker creates and starts one more worker process in a network namespace of its
// own, connected to the host by a veth pair: the worker reaches the frontend at the host end's
// address (the cluster needs Options.Isolatable, which binds the frontend on every address)
// and the host's loopback ports in forward (the model, say) through the same link; the
// worker's nexo.yaml is a copy with 127.0.0.1:<port> of those ports rewritten. The
// filesystem is shared (artifact store, sandbox root): only the network is the worker's own.
// Partition and Heal cut and restore the link; Stop removes the namespace.
func (c *Cluster) AddIsolatedWorker(ctx context.Context, forward ...int) (*Worker, error) {
	if !c.opts.Isolatable || c.opts.ExternalFrontend != "" {
		return nil, errors.New("cluster: AddIsolatedWorker needs Options.Isolatable (and no ExternalFrontend)")
	}
	if err := NetnsSupported(); err != nil {
		return nil, err
	}
	n, err := newNetns(forward)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	name := "w" + strconv.Itoa(len(c.workers)+1)
	w := &Worker{c: c, Name: name, Dir: filepath.Join(c.opts.Dir, name), net: n}
	c.workers = append(c.workers, w)
	c.mu.Unlock()
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return nil, err
	}
	if c.opts.WorkerConfig != "" {
		y := c.opts.WorkerConfig
		for _, port := range forward {
			p := ":" + strconv.Itoa(port)
			y = strings.ReplaceAll(y, "127.0.0.1"+p, n.hostIP+p)
			y = strings.ReplaceAll(y, "localhost"+p, n.hostIP+p)
		}
		n.config = filepath.Join(w.Dir, "nexo.yaml")
		if err := os.WriteFile(n.config, []byte(y), 0o644); err != nil {
			return nil, err
		}
	}
	return w, w.Start(ctx)
}

// isolate makes cmd run the worker in its network namespace (`ip netns exec`, which execs
// the worker in place: the pid is the worker's), connecting to the frontend through the veth.
func (w *Worker) isolate(cmd *exec.Cmd) error {
	n := w.net
	if n == nil {
		return nil
	}
	if err := n.wrap(cmd); err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, "NEXO_TEMPORAL_ADDRESS="+net.JoinHostPort(n.hostIP, strconv.Itoa(w.c.ports.Frontend)))
	if n.config != "" {
		cmd.Env = append(cmd.Env, "NEXO_CONFIG="+n.config)
	}
	return nil
}

// wrap makes cmd run in the namespace: `ip netns exec` execs the program in place, so
// cmd's pid is the program's (a SIGKILL reaches it, not a wrapper).
func (n *netns) wrap(cmd *exec.Cmd) error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	cmd.Path = ip
	cmd.Args = append([]string{"ip", "netns", "exec", n.name}, cmd.Args...)
	return nil
}

// Netns is a network namespace of its own for a process started outside a Cluster (an
// e2e test's sandbox host next to the embedded dev server): a veth pair to the host and,
// for each forwarded port, a forwarder from HostIP:port to the host's 127.0.0.1:port, so
// the process reaches loopback services (the Temporal frontend) only through the link.
// The filesystem is shared. Remove deletes it.
type Netns struct{ n *netns }

// NewNetns creates a namespace forwarding the host's loopback ports forward (NetnsSupported
// says whether it can work here).
func NewNetns(forward ...int) (*Netns, error) {
	if err := NetnsSupported(); err != nil {
		return nil, err
	}
	n, err := newNetns(forward)
	if err != nil {
		return nil, err
	}
	return &Netns{n: n}, nil
}

// HostIP is the host end's address: where the namespace reaches the forwarded ports.
func (n *Netns) HostIP() string { return n.n.hostIP }

// Wrap makes cmd run in the namespace (its pid stays the program's).
func (n *Netns) Wrap(cmd *exec.Cmd) error { return n.n.wrap(cmd) }

// Remove deletes the namespace, its veth pair and forwarders.
func (n *Netns) Remove() { n.n.remove() }

// Isolated reports whether the worker runs in a network namespace of its own.
func (w *Worker) Isolated() bool { return w.net != nil }

// Partition cuts an isolated worker off the network (the host end of its veth goes down):
// the worker keeps running and the server hears nothing from it. Heal restores the link.
func (w *Worker) Partition() error { return w.setLink("down") }

// Heal brings a partitioned worker's link back up.
func (w *Worker) Heal() error { return w.setLink("up") }

func (w *Worker) setLink(state string) error {
	if w.net == nil {
		return fmt.Errorf("cluster: worker %s is not isolated (AddIsolatedWorker)", w.Name)
	}
	if err := ipCmd("link", "set", w.net.hostIf, state); err != nil {
		return err
	}
	if state == "up" {
		return w.net.waitUp()
	}
	return nil
}

// waitUp waits until both ends of the veth pair are operationally up. The kernel applies
// a link's carrier change in its link-watch work, up to a second after `ip link set up`
// returns; until then the link drops what is sent (a healed worker's first connection
// failed, and a test with it).
func (n *netns) waitUp() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		host, _ := os.ReadFile("/sys/class/net/" + n.hostIf + "/operstate")
		ns, _ := exec.Command("ip", "-n", n.name, "-o", "link", "show", "dev", n.nsIf).Output()
		if strings.TrimSpace(string(host)) == "up" && strings.Contains(string(ns), "state UP") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: the link %s of namespace %s is not up 10s after it was set up (host side %q)",
				n.hostIf, n.name, strings.TrimSpace(string(host)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeNetns removes the namespaces of the isolated workers (Stop calls it).
func (c *Cluster) removeNetns() {
	for _, w := range c.Workers() {
		if w.net != nil {
			w.net.remove()
		}
	}
}
