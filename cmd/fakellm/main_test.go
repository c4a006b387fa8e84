package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakellm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeScript(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(p, []byte(`[{"content":"hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBusyPortPrintsOnlyTheError: on a port already taken, fakellm prints no banner, only
// the bind error and a hint, and exits 1.
func TestBusyPortPrintsOnlyTheError(t *testing.T) {
	bin, script := build(t), writeScript(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "--script", script, "--addr", ln.Addr().String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v; want exit 1", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout on a busy port = %q, want nothing (no banner)", stdout.String())
	}
	if !strings.Contains(stderr.String(), "address already in use") || !strings.Contains(stderr.String(), "--addr") {
		t.Errorf("stderr = %q, want the bind error and the --addr hint", stderr.String())
	}
}

// TestBannerNamesTheBoundAddress: the banner comes once the port is bound, with the real
// address (so --addr 127.0.0.1:0 tells which port it got).
func TestBannerNamesTheBoundAddress(t *testing.T) {
	bin, script := build(t), writeScript(t)
	cmd := exec.Command(bin, "--script", script, "--addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	var banner string
	select {
	case banner = <-line:
	case <-time.After(10 * time.Second):
		t.Fatal("no banner after 10s")
	}
	addr, _, ok := strings.Cut(strings.TrimPrefix(banner, "fake model at http://"), "/v1")
	if !ok || strings.HasSuffix(addr, ":0") {
		t.Fatalf("banner = %q, want the bound address", banner)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("banner says %s but it does not answer: %v", addr, err)
	}
	c.Close()
}
