package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"
)

// drainGrace bounds how long Shell waits, after the command's process group is dead, for
// its output pipes to close. A process that left the group (setsid) may hold them open;
// Shell then stops reading rather than wait for it.
const drainGrace = time.Second

// Shell runs command with `sh -c` in the workspace directory and returns its output and
// exit status; a non-zero exit is a result, not an error.
//
// The command gets a cleared environment (PATH, HOME, LANG and LocalOptions.Env), no stdin,
// and its own process group. When it finishes, times out (timeout <= 0 means
// DefaultShellTimeout), or ctx ends, the whole group is killed with SIGKILL, so children
// and background jobs (`sleep 100 & wait`) die with it and nothing it started outlives the
// call. The group's leader is a guard process that kills the group when the worker dies,
// even by SIGKILL, so a command never outlives its worker either (Temporal retries the
// call elsewhere; the orphan would run beside the retry). On timeout the result has TimedOut set and ExitCode 137 (128+SIGKILL), and the
// error is nil; when ctx itself ended the same result comes with an error wrapping the
// context's cause. Stdout and stderr are captured separately, each capped at MaxOutput
// bytes (the tail is kept).
func (l *Local) Shell(ctx context.Context, command string, timeout time.Duration) (ShellResult, error) {
	if err := l.check(ctx); err != nil {
		return ShellResult{}, fmt.Errorf("run shell: %w", err)
	}
	if !shellSupported {
		return ShellResult{}, fmt.Errorf("run shell: %w on %s", ErrNoShell, runtime.GOOS)
	}
	if timeout <= 0 {
		timeout = DefaultShellTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return ShellResult{}, fmt.Errorf("run shell: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return ShellResult{}, fmt.Errorf("run shell: %w", err)
	}
	argv := []string{"/bin/sh", "-c", command}
	var extra []*os.File
	if l.wrap != nil {
		if argv, extra, err = l.wrap(argv); err != nil {
			closeAll(outR, outW, errR, errW)
			return ShellResult{}, fmt.Errorf("run shell: %w", err)
		}
	}
	defer closeAll(extra...) // the child holds its own copies once started
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = extra
	cmd.Dir = l.realRoot
	cmd.Env = l.env
	cmd.Stdout, cmd.Stderr = outW, errW // *os.File: the child writes to the pipes directly

	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		closeAll(outR, outW, errR, errW)
		return ShellResult{}, fmt.Errorf("run shell: %w", ErrClosed)
	}
	// The group's leader is a guard that kills the group if the worker dies, so no command
	// outlives the worker (see guardScript); the command joins the guard's group. A
	// wrapped command that dies with the worker by itself leads its own group instead.
	var g *guard
	if l.selfGuard {
		ownGroup(cmd)
		err = cmd.Start()
	} else if g, err = startGuard(); err == nil {
		joinGroup(cmd, g)
		if err = cmd.Start(); err != nil {
			g.stop()
		}
	}
	pgid := 0
	if err == nil {
		pgid = cmd.Process.Pid
		if g != nil {
			pgid = g.pgid()
		}
		l.groups[pgid] = struct{}{}
	}
	l.mu.Unlock()
	closeAll(outW, errW) // the child holds its own copies
	if err != nil {
		closeAll(outR, errR)
		return ShellResult{}, fmt.Errorf("run shell: start %s: %w", filepath.Base(argv[0]), err)
	}

	stdout, stderr := NewTailBuffer(l.maxOutput), NewTailBuffer(l.maxOutput)
	var readers sync.WaitGroup
	readers.Add(2)
	go drain(&readers, stdout, outR)
	go drain(&readers, stderr, errR)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-runCtx.Done():
		killGroup(pgid) // the leader is not reaped yet: the id is still the command's
		killed = true
		waitErr = <-exited
	}
	if g != nil {
		// Background jobs the command left behind die with the group; the guard, unreaped
		// until now, keeps the group id from being reused by an unrelated process.
		g.stop()
	}
	// A self-guarded command's group is not killed once its leader is reaped (its id may
	// be another's by then): nothing it started outlives it (WrapDiesWithWorker).
	l.mu.Lock()
	delete(l.groups, pgid)
	l.mu.Unlock()

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		closeAll(outR, errR) // unblocks the readers
		<-drained
	}

	res := ShellResult{Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: killed}
	if cmd.ProcessState != nil {
		res.ExitCode = exitCode(cmd.ProcessState)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("run shell: wait: %w", waitErr)
	}
	if killed && ctx.Err() != nil {
		return res, fmt.Errorf("run shell: %w", context.Cause(ctx))
	}
	return res, nil
}

// drain copies r into buf until EOF (or until r is closed under it), then closes r.
func drain(wg *sync.WaitGroup, buf *TailBuffer, r *os.File) {
	defer wg.Done()
	defer r.Close()
	_, _ = io.Copy(buf, r)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// TailBuffer keeps the last max bytes written to it and counts the rest, holding at most
// 2·max bytes at any time, so a runaway command cannot exhaust the worker's memory. Every
// tier caps command output with it. Not safe for concurrent use: one reader goroutine owns
// it until the output is drained.
type TailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.dropped += int64(len(t.buf) + len(p) - t.max)
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		cut := len(t.buf) - t.max
		t.dropped += int64(cut)
		t.buf = append(t.buf[:0], t.buf[cut:]...)
	}
	return n, nil
}

// NewTailBuffer returns a TailBuffer keeping the last max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

// String returns the kept tail, prefixed with a "[truncated N bytes]" line when something
// was dropped. The cut never splits a UTF-8 sequence.
func (t *TailBuffer) String() string {
	b, dropped := t.buf, t.dropped
	if len(b) > t.max {
		dropped += int64(len(b) - t.max)
		b = b[len(b)-t.max:]
	}
	if dropped == 0 {
		return string(b)
	}
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
		dropped++
	}
	return fmt.Sprintf("[truncated %d bytes]\n", dropped) + string(b)
}
