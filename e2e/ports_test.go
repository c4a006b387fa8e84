package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Parallel tests each start servers on ports of their own. A port picked by listening on
// port 0 and closing at once can be picked again by another test, by another process of the
// same `go test ./...` (worker processes, the cluster tests, the benchmarks' servers), or by
// the kernel as the source port of an outgoing connection, before the process meant to bind
// it does (CI saw `check frontend port 39183: ... address already in use`). So holdPort
// takes its ports below the kernel's ephemeral range, which neither a port-0 bind nor an
// outgoing connection in any process ever gets, by binding candidates explicitly; holds each
// open with a listener of ours until the moment its server starts; then parks it in
// TIME_WAIT (the server's own bind, with SO_REUSEADDR, succeeds); and never hands a port out
// twice in one run of the package.

// heldPort is a loopback port this process holds open until release.
type heldPort struct {
	Port int
	mu   sync.Mutex
	l    net.Listener // nil once released
}

var portsGiven = struct {
	sync.Mutex
	m    map[int]bool
	held map[int]*heldPort // the ports still held, for releasePort
	next int               // the next candidate of holdPort
}{m: map[int]bool{}, held: map[int]*heldPort{}}

// releasePort releases port if this process holds it (see heldPort.release): for a server
// started in this process on a platform's port (startDevServer).
func releasePort(port int) error {
	portsGiven.Lock()
	h := portsGiven.held[port]
	portsGiven.Unlock()
	if h == nil {
		return nil
	}
	return h.release()
}

// holdPort reserves a loopback port for t; it is released when t ends at the latest.
func holdPort(t testing.TB) *heldPort {
	t.Helper()
	lo, hi := heldRange()
	for range hi - lo + 1 {
		portsGiven.Lock()
		port := portsGiven.next
		if port < lo || port > hi {
			port = lo + rand.IntN(hi-lo+1) // a random start, so reruns do not meet old TIME_WAITs
		}
		portsGiven.next = port + 1
		dup := portsGiven.m[port]
		portsGiven.Unlock()
		if dup { // given to an earlier test of this run
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil { // someone else's: try the next
			continue
		}
		h := &heldPort{Port: port, l: l}
		portsGiven.Lock()
		portsGiven.m[port] = true
		portsGiven.held[port] = h
		portsGiven.Unlock()
		t.Cleanup(func() { _ = h.release() })
		return h
	}
	t.Fatalf("reserve a loopback port: every port in %d-%d is taken or was handed out", lo, hi)
	return nil
}

// heldRange is where holdPort looks: from 10000 to just below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default), or, when that range starts too low
// to leave room, the top of the port space above it.
func heldRange() (lo, hi int) {
	ephLo, ephHi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && a <= z {
				ephLo, ephHi = a, z
			}
		}
	}
	if ephLo-1 >= 10000+1000 {
		return 10000, ephLo - 1
	}
	return max(ephHi+1, 10000), 65535
}

// portBaseOffsets are the ports NEXO_PORT_BASE moves, less the base: worker --dev's
// frontend, Web UI and gateway (config.UIPortOffset, config.GatewayPortOffset).
var portBaseOffsets = []int{0, 1000, 1001}

// holdPortBase reserves a NEXO_PORT_BASE for t: a base in 20000-30000 whose three ports
// (portBaseOffsets) this process could listen on, each held like holdPort's until
// released, and none handed out before in this run. The range lies below Linux's
// ephemeral ports, so no port-0 listener or outgoing connection takes them meanwhile.
func holdPortBase(t testing.TB) (int, []*heldPort) {
	t.Helper()
	for range 200 {
		base := 20000 + rand.IntN(10001)
		portsGiven.Lock()
		free := true
		for _, off := range portBaseOffsets {
			free = free && !portsGiven.m[base+off]
		}
		if free { // claimed before the listens: a port that fails stays claimed, unused
			for _, off := range portBaseOffsets {
				portsGiven.m[base+off] = true
			}
		}
		portsGiven.Unlock()
		if !free {
			continue
		}
		var held []*heldPort
		for _, off := range portBaseOffsets {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				break
			}
			held = append(held, &heldPort{Port: base + off, l: l})
		}
		if len(held) != len(portBaseOffsets) { // something else has one: try another base
			for _, h := range held {
				h.l.Close()
			}
			continue
		}
		portsGiven.Lock()
		for _, h := range held {
			portsGiven.held[h.Port] = h
		}
		portsGiven.Unlock()
		for _, h := range held {
			t.Cleanup(func() { _ = h.release() })
		}
		return base, held
	}
	t.Fatal("reserve a port base: 200 bases in 20000-30000 had a port taken")
	return 0, nil
}

// release lets the port go just before the process that binds it starts: the listener
// accepts one connection of ours and closes its side first, so the port itself is the
// side in TIME_WAIT. Releasing twice is fine.
func (h *heldPort) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.l == nil {
		return nil
	}
	l := h.l
	h.l = nil
	portsGiven.Lock()
	delete(portsGiven.held, h.Port)
	portsGiven.Unlock()
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return fmt.Errorf("release port %d: %w", h.Port, err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		return fmt.Errorf("release port %d: %w", h.Port, err)
	}
	return s.Close()
}

// freePort is a loopback port for a server the test starts in this process or passes on
// at once: held, then released into TIME_WAIT, and never handed to another test.
func freePort(t testing.TB) int {
	t.Helper()
	h := holdPort(t)
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	return h.Port
}

// TestPortsAreNeverHandedOutTwice: ports held by parallel tests differ and lie outside the
// kernel's ephemeral range, a released port can be bound by the process it was meant for,
// and it is not handed out again.
func TestPortsAreNeverHandedOutTwice(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	var held []*heldPort
	for range 50 {
		h := holdPort(t)
		if seen[h.Port] {
			t.Fatalf("port %d handed out twice", h.Port)
		}
		if lo, hi := heldRange(); h.Port < lo || h.Port > hi {
			t.Fatalf("port %d outside %d-%d", h.Port, lo, hi)
		}
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil { // what another process's port-0 bind gets
			if p := l.Addr().(*net.TCPAddr).Port; p == h.Port {
				t.Fatalf("a port-0 bind got held port %d", p)
			}
			l.Close()
		}
		seen[h.Port] = true
		held = append(held, h)
	}
	if err := held[0].release(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", held[0].Port))
	if err != nil {
		t.Fatalf("bind the released port %d: %v", held[0].Port, err)
	}
	l.Close()
	for range 50 {
		if p := freePort(t); seen[p] {
			t.Fatalf("port %d handed out again after its release", p)
		}
	}
}
