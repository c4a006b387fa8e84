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
	res, err := l.run(ctx, "run shell", []string{"/bin/sh", "-c", command}, runParams{timeout: timeout, wrap: l.wrap})
	return res.ShellResult, err
}

// Exec runs argv (no shell) in the workspace directory with opts.Stdin as its standard
// input, under every guarantee of Shell: the cleared environment, its own guarded process
// group killed when it ends, times out or ctx ends, stderr capped (the tail kept). Stdout
// is kept from its start up to opts.MaxStdout bytes: a process that prints more is killed
// at once and the result has StdoutOverflow set (the error is nil). On a sealed tier
// (bwrap) the process runs sealed, with opts.ReadOnly bound read-only at the same paths.
func (l *Local) Exec(ctx context.Context, argv []string, opts ExecOptions) (ExecResult, error) {
	if len(argv) == 0 || argv[0] == "" {
		return ExecResult{}, errors.New("exec: the command is empty")
	}
	wrap := l.wrap
	if l.wrapExec != nil {
		ro := opts.ReadOnly
		if opts.ReadOnlyWorkspace {
			// Bound after the workspace's own binds, these make it read-only inside.
			ro = append(append([]string(nil), ro...), l.realRoot)
			if l.root != l.realRoot {
				ro = append(ro, l.root)
			}
		}
		wrap = func(a []string) ([]string, []*os.File, error) { return l.wrapExec(a, ro) }
	}
	maxOut := opts.MaxStdout
	if maxOut <= 0 {
		maxOut = l.maxOutput
	}
	return l.run(ctx, "exec "+filepath.Base(argv[0]), argv, runParams{timeout: opts.Timeout, stdin: opts.Stdin, headStdout: maxOut,
		onStdout: opts.OnStdout, wrap: wrap})
}

// runParams are what Shell and Exec differ in.
type runParams struct {
	timeout time.Duration
	stdin   []byte // nil: none
	// headStdout > 0 keeps stdout's first headStdout bytes and kills the process when it
	// prints more; 0 keeps its tail, as Shell does.
	headStdout int
	// onStdout sees each chunk of stdout the buffer kept (ExecOptions.OnStdout).
	onStdout func([]byte)
	wrap     func([]string) ([]string, []*os.File, error)
}

// run starts argv as Shell describes and waits for it; op names the operation in errors.
func (l *Local) run(ctx context.Context, op string, argv []string, p runParams) (ExecResult, error) {
	if err := l.check(ctx); err != nil {
		return ExecResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if !shellSupported {
		return ExecResult{}, fmt.Errorf("%s: %w on %s", op, ErrNoShell, runtime.GOOS)
	}
	timeout := p.timeout
	if timeout <= 0 {
		timeout = DefaultShellTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return ExecResult{}, fmt.Errorf("%s: %w", op, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return ExecResult{}, fmt.Errorf("%s: %w", op, err)
	}
	var extra []*os.File
	if p.wrap != nil {
		if argv, extra, err = p.wrap(argv); err != nil {
			closeAll(outR, outW, errR, errW)
			return ExecResult{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	defer closeAll(extra...) // the child holds its own copies once started
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = extra
	cmd.Dir = l.realRoot
	cmd.Env = l.env
	cmd.Stdout, cmd.Stderr = outW, errW // *os.File: the child writes to the pipes directly
	var inW *os.File
	if p.stdin != nil {
		inR, w, err := os.Pipe()
		if err != nil {
			closeAll(outR, outW, errR, errW)
			return ExecResult{}, fmt.Errorf("%s: %w", op, err)
		}
		cmd.Stdin, inW = inR, w
		defer inR.Close()
	}

	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		closeAll(outR, outW, errR, errW)
		if inW != nil {
			inW.Close()
		}
		return ExecResult{}, fmt.Errorf("%s: %w", op, ErrClosed)
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
		if inW != nil {
			inW.Close()
		}
		return ExecResult{}, fmt.Errorf("%s: start %s: %w", op, filepath.Base(argv[0]), err)
	}
	if r, ok := cmd.Stdin.(*os.File); ok {
		r.Close() // the child holds its own copy: the write below fails once it is gone
	}
	if inW != nil {
		// A process that never reads its stdin must not block the worker: the write ends
		// with the process (its read end closes) or when the input is all in.
		go func() { _, _ = inW.Write(p.stdin); inW.Close() }()
	}

	var stdout outBuffer = NewTailBuffer(l.maxOutput)
	flooded := make(chan struct{})
	if p.headStdout > 0 {
		stdout = &headBuffer{max: p.headStdout, over: flooded}
	}
	stderr := NewTailBuffer(l.maxOutput)
	var readers sync.WaitGroup
	readers.Add(2)
	var outSink io.Writer = stdout
	if p.onStdout != nil {
		outSink = teeFunc{w: stdout, f: p.onStdout}
	}
	go drain(&readers, outSink, outR)
	go drain(&readers, stderr, errR)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed, overflow := false, false
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-runCtx.Done():
		killGroup(pgid) // the leader is not reaped yet: the id is still the command's
		killed = true
		waitErr = <-exited
	case <-flooded:
		killGroup(pgid)
		overflow = true
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
	if hb, ok := stdout.(*headBuffer); ok && hb.overflowed() {
		overflow = true
	}

	res := ExecResult{ShellResult: ShellResult{Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: killed}, StdoutOverflow: overflow}
	if cmd.ProcessState != nil {
		res.ExitCode = exitCode(cmd.ProcessState)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("%s: wait: %w", op, waitErr)
	}
	if killed && ctx.Err() != nil {
		return res, fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	return res, nil
}

// teeFunc writes to w and hands f each chunk (Exec's OnStdout).
type teeFunc struct {
	w io.Writer
	f func([]byte)
}

func (t teeFunc) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.f(p)
	return n, err
}

// outBuffer is what drain fills: a TailBuffer, or Exec's headBuffer.
type outBuffer interface {
	io.Writer
	String() string
}

// headBuffer keeps the first max bytes written to it; the first byte past them closes
// over (once), and the rest is dropped.
type headBuffer struct {
	max  int
	buf  []byte
	over chan struct{}
	shut bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
		p = p[min(room, len(p)):]
	}
	if len(p) > 0 && !h.shut {
		h.shut = true
		close(h.over)
	}
	return n, nil
}

func (h *headBuffer) String() string { return string(h.buf) }

// overflowed: read only after drain returned (one goroutine owns the buffer until then).
func (h *headBuffer) overflowed() bool { return h.shut }

// drain copies r into buf until EOF (or until r is closed under it), then closes r.
func drain(wg *sync.WaitGroup, buf io.Writer, r *os.File) {
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
