package cluster

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process with its output in a log file (and the last lines in memory).
type process struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{}
	ready chan struct{}
	log   *os.File

	mu    sync.Mutex
	lines []string
}

const tailLines = 60

// startProcess starts cmd, copying stdout and stderr to logPath. When readyLine is set,
// process.ready closes at the first stdout or stderr line starting with it.
func startProcess(name string, cmd *exec.Cmd, logPath, readyLine string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), ready: make(chan struct{}), log: f}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group: a kill reaches the children it started (a shell tool's
	// commands) as a host crash would, and a Ctrl-C of the test does not reach it first.
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s started, pid %d: %s\n", name, cmd.Process.Pid, strings.Join(cmd.Args, " "))
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			p.mu.Lock()
			if len(line) > 400 {
				line = line[:400] + "…"
			}
			p.lines = append(p.lines, line)
			if len(p.lines) > tailLines {
				p.lines = p.lines[len(p.lines)-tailLines:]
			}
			p.mu.Unlock()
			if readyLine != "" && strings.HasPrefix(line, readyLine) {
				once.Do(func() { close(p.ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		fmt.Fprintf(f, "=== %s exited: %v\n", name, err)
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// wait waits for the exit, at most d, then kills the group.
func (p *process) wait(d time.Duration) {
	select {
	case <-p.done:
	case <-time.After(d):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the last lines the process printed.
func (p *process) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// freeLowPort returns a free loopback port in 20000-32767 (random, so concurrent clusters
// rarely race for one).
func freeLowPort() (int, error) {
	for range 200 {
		port := 20000 + rand.IntN(12768)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in 20000-32767")
}

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
