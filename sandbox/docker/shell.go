package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/moby/moby/client"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Timing of Shell's clean-up.
const (
	// drainGrace bounds how long Shell waits, after killing a command's process group,
	// for its output stream to end. A process that left the group (setsid) may hold it
	// open; Shell then closes the stream rather than wait.
	drainGrace = 2 * time.Second
	// killTimeout bounds the exec that kills a process group, which runs even when the
	// caller's context has ended.
	killTimeout = 10 * time.Second
	// retryInspect bounds how long an exec'd command's end may take to be recorded.
	retryInspect = 2 * time.Second
)

// shellScript is the fallback for images the command server cannot run in (see
// server.go): one exec per command. It runs the command ($1) in a process group of its
// own and prints that group's id as the first line of stderr, which Shell strips and keeps
// to kill the group on timeout; a watchdog in the group kills it after the backstop ($2
// seconds) if the worker is gone. When the command ends, whatever it left in its group
// (background jobs) is killed, so nothing outlives the call. Without setsid the command
// runs in the exec's own group, which Docker already makes a session of, and then only
// the timeout kill reaches background jobs.
const shellScript = `if command -v setsid >/dev/null 2>&1; then
setsid /bin/sh -c 'echo $$ >&2; (sleep "$2"; kill -9 0) </dev/null >/dev/null 2>&1 & exec /bin/sh -c "$1"' nexo-shell "$1" "$2" &
c=$!
wait $c 2>/dev/null
rc=$?
kill -9 -$c 2>/dev/null
exit $rc
fi
echo $$ >&2
exec /bin/sh -c "$1"`

// Shell runs command with `sh -c` in the workspace, as the container's user, and returns
// its output and exit status; a non-zero exit is a result, not an error.
//
// The command runs in a process group of its own with no stdin; when it ends, whatever it
// left running in its group (background jobs) is killed. When it outlives timeout (<= 0
// means sandbox.DefaultShellTimeout) or ctx ends, the whole group is killed with SIGKILL;
// the result then has TimedOut set and ExitCode 137 (128+SIGKILL), and the error is nil on
// a timeout and wraps the context's cause when ctx ended. Stdout and stderr come
// separately, each capped at MaxOutput bytes (the tail is kept, after a "[truncated N
// bytes]" line).
//
// Commands go to a command server that lives in the container (see server.go), so a call
// costs milliseconds instead of an exec's start; an image that cannot run the server gets
// one exec per command, with the same behaviour.
func (s *Sandbox) Shell(ctx context.Context, command string, timeout time.Duration) (sandbox.ShellResult, error) {
	res, _, err := s.shell(ctx, command, timeout, false)
	return res, err
}

// shell is Shell; list asks for the workspace's listing output after the command (see
// ShellAndList), nil when it was not taken.
func (s *Sandbox) shell(ctx context.Context, command string, timeout time.Duration, list bool) (sandbox.ShellResult, []byte, error) {
	if err := s.check(ctx); err != nil {
		return sandbox.ShellResult{}, nil, fmt.Errorf("run shell: %w", err)
	}
	if strings.IndexByte(command, 0) >= 0 {
		return sandbox.ShellResult{}, nil, errors.New("run shell: the command contains a NUL byte")
	}
	if timeout <= 0 {
		timeout = sandbox.DefaultShellTimeout
	}
	max := s.MaxOutput
	if max <= 0 {
		max = sandbox.DefaultMaxOutput
	}
	res, listing, err := s.runListed(ctx, command, timeout, max, list)
	if err != nil {
		return res, nil, fmt.Errorf("run shell: %w", err)
	}
	return res, listing, nil
}

// run runs command on a command server of the container, or with an exec of its own
// when the image cannot run servers.
func (s *Sandbox) run(ctx context.Context, command string, timeout time.Duration, max int) (sandbox.ShellResult, error) {
	res, _, err := s.runListed(ctx, command, timeout, max, false)
	return res, err
}

// runListed is run; with list, a command server lists the workspace after the command
// in the same round trip and listing is that output (nil when it was not taken: an
// exec, a command killed, a listing that failed or outgrew maxWorkspaceListing).
func (s *Sandbox) runListed(ctx context.Context, command string, timeout time.Duration, max int, list bool) (res sandbox.ShellResult, listing []byte, err error) {
	srv, err := s.pool.get(ctx)
	if err == nil && srv == nil {
		res, err := s.runExec(ctx, command, timeout, max)
		s.forgetIfGone(err)
		return res, nil, err
	}
	if err != nil {
		err = s.apiError(err)
		s.forgetIfGone(err)
		return sandbox.ShellResult{}, nil, err
	}
	kind := ""
	if list {
		kind = kindList
	}
	res, listing, err = s.runOnServer(ctx, srv, command, timeout, max, kind)
	s.forgetIfGone(err)
	return res, listing, err
}

// Kinds of request to a command server besides a plain command (see serverScript).
const (
	kindList = "L" // a command, then the workspace's listing
	kindCat  = "C" // the workspace file named on the command line, printed by cat alone
)

// cat prints the workspace file rel (catScript's exit codes) with one light request on a
// command server: no session, no watchdog, only a subshell and cat, a few processes
// fewer than a command's. An image without the server runs catScript as a command.
func (s *Sandbox) cat(ctx context.Context, rel string, max int) (sandbox.ShellResult, error) {
	srv, err := s.pool.get(ctx)
	if err == nil && srv == nil {
		cmd := "set -- " + shellQuote(s.set.workdir) + " " + shellQuote(rel) + "\n" + catScript
		res, err := s.runExec(ctx, cmd, listTimeout, max)
		s.forgetIfGone(err)
		return res, err
	}
	if err != nil {
		err = s.apiError(err)
		s.forgetIfGone(err)
		return sandbox.ShellResult{}, err
	}
	res, _, err := s.runOnServer(ctx, srv, rel, listTimeout, max, kindCat)
	s.forgetIfGone(err)
	return res, err
}

// forgetIfGone drops the container's command servers from the Manager once the container
// is known to be gone.
func (s *Sandbox) forgetIfGone(err error) {
	if errors.Is(err, ErrContainerGone) && s.m != nil {
		s.m.dropPool(s.id)
	}
}

// runOnServer runs one command on srv and gives srv back to the pool when it is still
// usable.
func (s *Sandbox) runOnServer(ctx context.Context, srv *shellServer, command string, timeout time.Duration, max int, kind string) (sandbox.ShellResult, []byte, error) {
	list := kind == kindList
	mark := newMark(kind)
	j := newJob(mark, max, s.track)
	if list {
		j.listing = &capBuffer{max: maxWorkspaceListing}
	}
	defer func() {
		if g := int(j.pgid.Load()); g != 0 {
			s.untrack(g)
		}
	}()
	srv.setJob(j)
	if err := srv.send(mark, backstop(timeout), encodeCommand(command)); err != nil {
		s.pool.discard(srv)
		return sandbox.ShellResult{}, nil, fmt.Errorf("send command: %w", s.serverGone(err))
	}
	s.pool.warm() // a spare for the next command, and for killing this one

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	killed := false
	select {
	case <-j.done:
	case <-srv.dead:
	case <-timer.C:
		killed = true
	case <-ctx.Done():
		killed = true
	}
	var killErr error
	if killed {
		select { // the group id is the first thing the command prints
		case <-j.started:
		case <-srv.dead:
		case <-time.After(time.Second):
		}
		if g := int(j.pgid.Load()); g != 0 {
			killErr = s.killGroup(context.WithoutCancel(ctx), g)
		}
		select {
		case <-j.done:
		case <-srv.dead:
		case <-time.After(drainGrace):
		}
	}
	complete := isClosed(j.done)
	srv.setJob(nil) // from here on nothing writes to j
	res := sandbox.ShellResult{Stdout: j.stdout.String(), Stderr: j.stderr.String(), TimedOut: killed}
	var listing []byte
	switch {
	case complete:
		res.ExitCode = int(j.code.Load())
		if list && !killed && j.listCode.Load() == 0 && !j.listing.over {
			listing = append([]byte{}, j.listing.b.Bytes()...) // not nil: an empty workspace is listed too
		}
		s.pool.put(srv)
	case srv.isDead():
		// The server died with the command: the container stopped or went, or the command
		// killed every process of its user.
		s.pool.discard(srv)
		if err := s.serverGone(nil); errors.Is(err, ErrContainerGone) {
			return res, nil, err
		}
		res.ExitCode = 137
		if !killed {
			res.Stderr += "\n[the command's shell was killed]"
		}
	default:
		// Output still held open after the kill (a process that left the group): this
		// server's stream is no longer trustworthy.
		s.pool.discard(srv)
		res.ExitCode = 137
	}
	if killed && res.ExitCode == 0 {
		res.ExitCode = 137
	}
	if killed && ctx.Err() != nil {
		return res, nil, context.Cause(ctx)
	}
	if killErr != nil {
		return res, nil, fmt.Errorf("kill timed-out command: %w", killErr)
	}
	return res, listing, nil
}

// serverGone explains a dead server: ErrContainerGone when the container is gone or no
// longer runs, else err (or a generic error).
func (s *Sandbox) serverGone(err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, ierr := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	info := res.Container
	if (ierr != nil && cerrdefs.IsNotFound(ierr)) || (ierr == nil && (info.State == nil || !info.State.Running)) {
		return fmt.Errorf("%w: container %s (%s)", ErrContainerGone, s.name, shortID(s.id))
	}
	if err == nil {
		err = errors.New("the shell server in the container ended")
	}
	return err
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// runExec runs command with an exec of its own (shellScript), for images that cannot run
// the command server.
func (s *Sandbox) runExec(ctx context.Context, command string, timeout time.Duration, max int) (sandbox.ShellResult, error) {
	stdout, stderr := sandbox.NewTailBuffer(max), sandbox.NewTailBuffer(max)
	marker := newGroupWriter(stderr, s.track)
	run, err := s.start(ctx, []string{"/bin/sh", "-c", shellScript, "nexo-shell", command, backstop(timeout)})
	if err != nil {
		return sandbox.ShellResult{}, err
	}
	defer run.close()
	defer func() {
		if g := marker.group(); g != 0 {
			s.untrack(g)
		}
	}()
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, marker, run.stream.Reader)
		copied <- err
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var copyErr error
	killed := false
	select {
	case copyErr = <-copied: // the command, and all that held its output, ended
	case <-timer.C:
		killed = true
	case <-ctx.Done():
		killed = true
	}
	if killed {
		copyErr = s.stop(context.WithoutCancel(ctx), run, marker, copied)
	}
	res := sandbox.ShellResult{Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: killed}
	code, err := s.exitCode(context.WithoutCancel(ctx), run.execID)
	switch {
	case err == nil:
		res.ExitCode = code
	case !killed:
		return res, err
	}
	if killed && res.ExitCode == 0 {
		res.ExitCode = 137 // the exit was not recorded in time; it was SIGKILL
	}
	if killed && ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	if copyErr != nil {
		return res, copyErr
	}
	return res, nil
}

// stop kills the process group of an exec'd command that ran too long and waits for its
// output stream to end (closing it after drainGrace). It returns an error only when the
// group could not be killed.
func (s *Sandbox) stop(ctx context.Context, run *attached, marker *groupWriter, copied <-chan error) error {
	select { // the group id is the first thing the command prints
	case <-marker.known:
	case <-time.After(time.Second):
	}
	var killErr error
	if g := marker.group(); g != 0 {
		killErr = s.killGroup(ctx, g)
	}
	select {
	case <-copied:
	case <-time.After(drainGrace):
		run.close() // unblocks the copy
		<-copied
	}
	if killErr != nil {
		return fmt.Errorf("kill timed-out command: %w", killErr)
	}
	return nil
}

// attached is a started exec: its id and its attached, multiplexed output stream.
type attached struct {
	execID string
	stream client.HijackedResponse
	once   sync.Once
}

func (a *attached) close() { a.once.Do(a.stream.Close) }

// start creates an exec of argv in the workspace and attaches to its output.
func (s *Sandbox) start(ctx context.Context, argv []string) (*attached, error) {
	created, err := s.cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		Cmd: argv, AttachStdout: true, AttachStderr: true, WorkingDir: s.set.workdir,
	})
	if err != nil {
		return nil, fmt.Errorf("create exec: %w", s.apiError(err))
	}
	res, err := s.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start exec: %w", s.apiError(err))
	}
	return &attached{execID: created.ID, stream: res.HijackedResponse}, nil
}

// exitCode returns an exec's exit code once Docker has recorded its end, which follows
// the end of its output stream closely but not always before it.
func (s *Sandbox) exitCode(ctx context.Context, execID string) (int, error) {
	deadline := time.Now().Add(retryInspect)
	wait := time.Millisecond
	for {
		info, err := s.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("inspect exec: %w", s.apiError(err))
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("inspect exec: still running %v after its output ended", retryInspect)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// capture runs argv with an exec of its own to its end and returns the tail of its stdout
// (max bytes) and of its stderr, and its exit code: for killGroup without a server.
func (s *Sandbox) capture(ctx context.Context, argv []string, max int) (stdout []byte, stderr string, code int, err error) {
	run, err := s.start(ctx, argv)
	if err != nil {
		return nil, "", 0, err
	}
	defer run.close()
	out := sandbox.NewTailBuffer(max)
	errBuf := sandbox.NewTailBuffer(4096)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, errBuf, run.stream.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		run.close()
		<-copied
		return nil, "", 0, context.Cause(ctx)
	}
	if err != nil {
		return nil, "", 0, fmt.Errorf("read output: %w", err)
	}
	code, err = s.exitCode(context.WithoutCancel(ctx), run.execID)
	if err != nil {
		return nil, "", 0, err
	}
	return []byte(out.String()), errBuf.String(), code, nil
}

// killGroup sends SIGKILL to a process group in the container, as the container's user
// (who may signal its own processes with every capability dropped): through an idle
// command server, whose kill is a shell builtin and needs no new process (a fork bomb at
// the pids limit leaves none to start), else through an exec.
func (s *Sandbox) killGroup(ctx context.Context, group int) error {
	if group <= 1 {
		return fmt.Errorf("refusing to kill process group %d", group) // -1 would be every process
	}
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	if srv, ok := s.pool.takeIdle(); ok {
		mark := newMark("K")
		j := newJob(mark, 4096, nil)
		srv.setJob(j)
		if err := srv.send(mark, strconv.Itoa(group), ""); err == nil {
			select {
			case <-j.done:
				srv.setJob(nil)
				s.pool.put(srv)
				return nil // exit 1 means the group was gone already: fine
			case <-srv.dead:
			case <-ctx.Done():
			}
		}
		srv.setJob(nil)
		s.pool.discard(srv)
	}
	_, stderr, code, err := s.capture(ctx, []string{"/bin/sh", "-c", "kill -9 -" + strconv.Itoa(group)}, 4096)
	if err != nil {
		return fmt.Errorf("kill process group %d: %w", group, err)
	}
	// A group that is already gone is what we wanted.
	if code != 0 && !strings.Contains(stderr, "No such process") {
		return fmt.Errorf("kill process group %d: exit %d: %s", group, code, stderr)
	}
	return nil
}

// track and untrack keep the process groups of running commands, for Close. A command
// that started as the handle closed is killed at once: Close either sees its group or
// its group sees Close.
func (s *Sandbox) track(group int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		go func() { _ = s.killGroup(context.Background(), group) }() // best effort, as Close
		return
	}
	s.groups[group] = struct{}{}
}

func (s *Sandbox) untrack(group int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.groups, group)
}

// groupWriter is the stderr of a command started by shellScript: it takes the first line
// (the process group id), reports it, and passes the rest on. Written by one goroutine.
type groupWriter struct {
	next    *sandbox.TailBuffer
	onGroup func(int)
	known   chan struct{} // closed once the first line is in (group may still be 0)
	line    []byte
	done    bool
	id      atomic.Int64
}

func newGroupWriter(next *sandbox.TailBuffer, onGroup func(int)) *groupWriter {
	return &groupWriter{next: next, onGroup: onGroup, known: make(chan struct{})}
}

// maxMarker bounds the first line: a process id has at most 7 digits on Linux.
const maxMarker = 16

func (w *groupWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 && len(w.line)+len(p) <= maxMarker {
			w.line = append(w.line, p...)
			return n, nil
		}
		rest := p
		if i >= 0 {
			w.line = append(w.line, p[:i]...)
			rest = p[i+1:]
		}
		w.done = true
		if g, err := strconv.Atoi(string(w.line)); err == nil && i >= 0 && g > 1 {
			w.id.Store(int64(g))
			w.onGroup(g)
		} else {
			// Not our marker (the exec failed before the script ran): it is output.
			_, _ = w.next.Write(w.line)
			if i >= 0 {
				_, _ = w.next.Write([]byte{'\n'})
			}
		}
		close(w.known)
		p = rest
	}
	_, _ = w.next.Write(p)
	return n, nil
}

// group returns the process group id, or 0 while (or if) it is unknown.
func (w *groupWriter) group() int { return int(w.id.Load()) }
