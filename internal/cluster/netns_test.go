package cluster

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// requireNetns skips without root or `ip netns`, except in CI (CI=true), where it fails.
func requireNetns(t *testing.T) {
	t.Helper()
	err := NetnsSupported()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// A namespace reaches a forwarded loopback service through its veth, not while partitioned,
// again once healed; `ip netns exec` runs the command in place (same pid); remove leaves no
// namespace and no link behind.
func TestNetnsPartitionAndHeal(t *testing.T) {
	requireNetns(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host answers") })}
	go srv.Serve(l)
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port
	n, err := newNetns([]int{port})
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			n.remove()
		}
	}()
	w := &Worker{Name: "t", net: n}
	get := func() (string, error) {
		out, err := exec.Command("ip", "netns", "exec", n.name, curl, "-sS", "--max-time", "2",
			"http://"+net.JoinHostPort(n.hostIP, strconv.Itoa(port))+"/").CombinedOutput()
		return string(out), err
	}
	if out, err := get(); err != nil || out != "host answers" {
		t.Fatalf("from the namespace: %q, %v", out, err)
	}
	// The namespace's own loopback is not the host's.
	if out, err := exec.Command("ip", "netns", "exec", n.name, curl, "-sS", "--max-time", "2",
		"http://127.0.0.1:"+strconv.Itoa(port)+"/").CombinedOutput(); err == nil {
		t.Fatalf("the host's loopback answered inside the namespace: %s", out)
	}
	if err := w.Partition(); err != nil {
		t.Fatal(err)
	}
	if out, err := get(); err == nil {
		t.Fatalf("partitioned, the host still answered: %q", out)
	}
	if err := w.Heal(); err != nil {
		t.Fatal(err)
	}
	if out, err := get(); err != nil || out != "host answers" {
		t.Fatalf("healed: %q, %v", out, err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.name, "sh", "-c", "echo $$; read x")
	stdin, _ := cmd.StdinPipe()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	_ = cmd.Wait()
	if got := strings.TrimSpace(out.String()); got != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("ip netns exec ran the command as pid %s, not in place (pid %d)", got, cmd.Process.Pid)
	}
	n.remove()
	removed = true
	if list, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(list), n.name) {
		t.Errorf("namespace %s left: %s", n.name, list)
	}
	if exec.Command("ip", "link", "show", n.hostIf).Run() == nil {
		t.Errorf("link %s left", n.hostIf)
	}
}
