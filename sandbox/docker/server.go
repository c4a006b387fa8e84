package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/moby/moby/client"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Why a command server: starting an exec costs Docker (containerd, runc) about as much as
// `docker exec` on the command line, 60–100 ms here, nearly all of it inside the engine.
// A shell tool call should cost a few milliseconds. So each container gets long-lived
// execs of a small sh loop (serverScript) that read commands on stdin and run them with
// fork/exec inside the container; their stdout and stderr reach the worker through the
// exec's own streams, which Docker keeps apart, with a per-command random marker ending
// each. Servers are pooled per container in the Manager and reused by every handle of the
// run (one command at a time each; concurrent commands get more servers). An image the
// server cannot run in (no setsid) falls back to one exec per command.
//
// A server exits when its stdin closes, so a worker that dies leaves none behind, and the
// command it was running is killed by its backstop (timeout plus backstopGrace).
//
// The streams carry only the sandbox's own output: a command that forges a marker can
// only misreport its own result. Nothing the container prints is executed by the worker.

// serverScript reads requests of three lines: a marker; a backstop in whole seconds; the
// command with newlines, backslashes and control bytes written as printf %b escapes. It
// runs the command as `sh -c` in a new session (its own process group) with no stdin; the
// command's first stderr line is "<marker>B<pgid>", and when it ends whatever it left in
// its group is killed and the server writes "<marker>E<exit code>" to stdout and
// "<marker>E" to stderr. A watchdog in the command's group kills the group after the
// backstop, in case the worker that should time it out is gone.
//
// A marker starting with K asks to SIGKILL the process group on the second line instead:
// that uses shell builtins only, so it works even when the container cannot fork (a fork
// bomb at its pids limit). A marker starting with L asks, once the command and its group
// are gone, for the workspace's listing (listScript's find and stat, see listing.go) on
// stdout between "<marker>S" and "<marker>L<listing's exit code>", before the end line:
// the snapshot after a shell call then needs no round trip of its own. A marker starting
// with C asks for the workspace file named on the command line, printed by cat in a
// subshell (catScript's checks and exit codes, see listing.go) without the session and
// watchdog a command gets: a snapshot's read of a changed file. $1 is the marker
// of the startup handshake, $2 the workspace.
const serverScript = `command -v setsid >/dev/null 2>&1 || { echo "nexo shell server: setsid not found" >&2; exit 1; }
nl='
'
printf '%sE0\n' "$1"
printf '%sE\n' "$1" >&2
while IFS= read -r m && IFS= read -r t && IFS= read -r c; do
case $m in
K*)
kill -9 -"$t" 2>/dev/null
printf '%sE%d\n' "$m" $?
printf '%sE\n' "$m" >&2
continue;;
esac
c=$(printf '%bx' "$c")
c=${c%x}
case $m in
C*)
(cd "$2" || exit 3
[ -L "$c" ] && exit 4
[ -f "$c" ] || { [ -e "$c" ] && exit 4; exit 5; }
exec cat -- "$c") </dev/null
printf '%sE%d\n' "$m" $?
printf '%sE\n' "$m" >&2
continue;;
esac
setsid /bin/sh -c 'printf "%sB%d\n" "$0" $$ >&2; (sleep "$2"; kill -9 0) </dev/null >/dev/null 2>&1 & exec /bin/sh -c "$1"' "$m" "$c" "$t" </dev/null &
p=$!
wait $p 2>/dev/null
r=$?
kill -9 -$p 2>/dev/null
case $m in
L*)
printf '%sS\n' "$m"
(cd "$2" && find . -mindepth 1 \( -name "*$nl*" -exec echo N \; \) -o -exec stat -c '%f|%i|%s|%Y|%Z|%n' {} +) </dev/null 2>/dev/null
printf '%sL%d\n' "$m" $?;;
esac
printf '%sE%d\n' "$m" "$r"
printf '%sE\n' "$m" >&2
done`

// Pool sizes.
const (
	// maxIdleServers bounds the idle servers kept per container.
	maxIdleServers = 4
	// serverStartTimeout bounds a server's startup handshake.
	serverStartTimeout = 15 * time.Second
)

// errNoServer: the image cannot run the command server; use one exec per command.
var errNoServer = errors.New("the container cannot run the shell server")

// shellPool holds the idle command servers of one container.
type shellPool struct {
	cli         Client
	containerID string
	workdir     string

	mu          sync.Mutex
	idle        []*shellServer
	busy        int  // servers handed out and not yet put back or discarded
	unsupported bool // the image cannot run the server
	warming     bool // a spare server is being started
	closed      bool
}

// get returns an idle server, or starts one. It returns (nil, nil) when the image cannot
// run servers, and then the caller execs.
func (p *shellPool) get(ctx context.Context) (*shellServer, error) {
	if srv, ok := p.takeIdle(); ok {
		return srv, nil
	}
	p.mu.Lock()
	unsupported := p.unsupported
	p.mu.Unlock()
	if unsupported {
		return nil, nil
	}
	srv, err := startServer(ctx, p.cli, p.containerID, p.workdir)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case errors.Is(err, errNoServer):
		p.unsupported = true
		return nil, nil
	case err != nil:
		return nil, err
	}
	p.busy++
	return srv, nil
}

// takeIdle pops a live idle server.
func (p *shellPool) takeIdle() (*shellServer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		srv := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !srv.isDead() {
			p.busy++
			return srv, true
		}
	}
	return nil, false
}

// put returns a server from get or takeIdle to the pool (or closes it when the pool is
// full or the server dead).
func (p *shellPool) put(srv *shellServer) {
	p.mu.Lock()
	p.busy--
	if !p.closed && !srv.isDead() && len(p.idle) < maxIdleServers {
		p.idle = append(p.idle, srv)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	srv.close()
}

// discard closes a server from get or takeIdle that is no longer usable.
func (p *shellPool) discard(srv *shellServer) {
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
	srv.close()
}

// unused reports whether nothing of the pool is in use or alive, so the Manager may forget
// it (a handle that still holds it keeps working).
func (p *shellPool) unused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy > 0 || p.warming {
		return false
	}
	for _, srv := range p.idle {
		if !srv.isDead() {
			return false
		}
	}
	return true
}

// warm starts a spare server in the background when none is idle, so that killing a
// command never has to start a process (which a fork bomb at the pids limit prevents).
func (p *shellPool) warm() {
	p.mu.Lock()
	if p.closed || p.unsupported || p.warming || len(p.idle) > 0 {
		p.mu.Unlock()
		return
	}
	p.warming = true
	p.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), serverStartTimeout)
		defer cancel()
		srv, err := startServer(ctx, p.cli, p.containerID, p.workdir)
		p.mu.Lock()
		p.warming = false
		if err == nil {
			p.busy++ // put takes it back
		}
		p.mu.Unlock()
		if err == nil {
			p.put(srv)
		}
	}()
}

// close closes the idle servers; servers in use are closed when they come back.
func (p *shellPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, srv := range idle {
		srv.close()
	}
}

// shellServer is one running serverScript and the worker's end of its streams.
type shellServer struct {
	execID string
	hj     client.HijackedResponse

	mu   sync.Mutex
	cur  *job          // the command whose output the streams carry now
	dead chan struct{} // closed when the output stream ends
	once sync.Once
}

// startServer starts a server in the container and waits for its handshake.
func startServer(ctx context.Context, cli Client, containerID, workdir string) (*shellServer, error) {
	mark := newMark("")
	created, err := cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		Cmd:         []string{"/bin/sh", "-c", serverScript, "nexo-shell-server", mark, workdir},
		AttachStdin: true, AttachStdout: true, AttachStderr: true, WorkingDir: workdir,
	})
	if err != nil {
		return nil, fmt.Errorf("create shell server: %w", err)
	}
	res, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start shell server: %w", err)
	}
	srv := &shellServer{execID: created.ID, hj: res.HijackedResponse, dead: make(chan struct{})}
	hello := newJob(mark, 4096, nil)
	srv.cur = hello
	go srv.read()
	timer := time.NewTimer(serverStartTimeout)
	defer timer.Stop()
	select {
	case <-hello.done:
		srv.setJob(nil)
		return srv, nil
	case <-srv.dead:
		return nil, fmt.Errorf("%w: %s", errNoServer, bytes.TrimSpace([]byte(hello.stderr.String())))
	case <-timer.C:
		srv.close()
		return nil, fmt.Errorf("%w: no handshake in %v", errNoServer, serverStartTimeout)
	case <-ctx.Done():
		srv.close()
		return nil, context.Cause(ctx)
	}
}

// read routes the server's output to the current job until the stream ends.
func (srv *shellServer) read() {
	_, _ = stdcopy.StdCopy(routeWriter{srv, false}, routeWriter{srv, true}, srv.hj.Reader)
	close(srv.dead)
	srv.close()
}

func (srv *shellServer) isDead() bool {
	select {
	case <-srv.dead:
		return true
	default:
		return false
	}
}

func (srv *shellServer) setJob(j *job) {
	srv.mu.Lock()
	srv.cur = j
	srv.mu.Unlock()
}

// close ends the server: its stdin closes, so its loop ends (after a running command).
func (srv *shellServer) close() { srv.once.Do(srv.hj.Close) }

// send writes one request: a command with its backstop, or (with a K marker) a process
// group to kill, arg the group id.
func (srv *shellServer) send(mark, arg, command string) error {
	_, err := io.WriteString(srv.hj.Conn, mark+"\n"+arg+"\n"+command+"\n")
	return err
}

// backstop is how long a command may run in the container if the worker that should kill
// it at its timeout is gone: the timeout, rounded up to seconds, plus a grace.
func backstop(timeout time.Duration) string {
	return strconv.Itoa(int((timeout+time.Second-1)/time.Second) + int(backstopGrace/time.Second))
}

// backstopGrace is the margin the worker has over the in-container watchdog.
const backstopGrace = 10 * time.Second

// routeWriter passes one of the server's streams to the current job.
type routeWriter struct {
	srv    *shellServer
	stderr bool
}

// Write holds the server's lock while the job takes the bytes (in memory, quickly), so once
// setJob has replaced a job, nothing writes to it any more.
func (w routeWriter) Write(p []byte) (int, error) {
	w.srv.mu.Lock()
	defer w.srv.mu.Unlock()
	j := w.srv.cur
	if j == nil {
		return len(p), nil // between commands: stray output of an escaped process
	}
	if w.stderr {
		return j.errScan.Write(p)
	}
	return j.outScan.Write(p)
}

// job is one command on a server: its output, its process group and its exit code.
type job struct {
	stdout, stderr   *sandbox.TailBuffer
	outScan, errScan *markScanner

	started chan struct{} // closed when the process group is known
	done    chan struct{} // closed when both streams have ended
	pgid    atomic.Int64
	code    atomic.Int64
	ended   int // streams ended, of 2; the reader goroutine's

	// listing, when the command asked for the workspace's listing after it (an L
	// marker), takes stdout between the S and L lines; listCode is the listing's exit
	// code, -1 until its L line came. Read once done is closed.
	listing  *capBuffer
	listCode atomic.Int64
}

// capBuffer keeps what is written to it up to max bytes; past that it keeps nothing more
// and says so (over): a listing cut short is no listing.
type capBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if c.over || c.b.Len()+len(p) > c.max {
		c.over = true
		return len(p), nil
	}
	return c.b.Write(p)
}

// newJob prepares a job with marker mark and output caps max; onGroup (may be nil) hears
// the process group id as soon as it is known. The output buffers are written by the
// server's reader goroutine and may be read once done is closed, or once the reader has
// stopped (the server is dead).
func newJob(mark string, max int, onGroup func(int)) *job {
	j := &job{stdout: sandbox.NewTailBuffer(max), stderr: sandbox.NewTailBuffer(max),
		started: make(chan struct{}), done: make(chan struct{})}
	end := func() {
		j.ended++
		if j.ended == 2 {
			close(j.done)
		}
	}
	j.listCode.Store(-1)
	j.outScan = &markScanner{mark: []byte(mark), sink: j.stdout}
	j.outScan.onLine = func(kind byte, arg string) {
		switch kind {
		case 'S': // the listing follows (only asked for with an L marker)
			if j.listing != nil {
				j.outScan.sink = j.listing
			}
		case 'L':
			if code, err := strconv.Atoi(arg); err == nil && j.listing != nil {
				j.listCode.Store(int64(code))
			}
		case 'E':
			code, _ := strconv.Atoi(arg)
			j.code.Store(int64(code))
			end()
		}
	}
	j.errScan = &markScanner{mark: []byte(mark), sink: j.stderr, onLine: func(kind byte, arg string) {
		switch kind {
		case 'B':
			if g, err := strconv.Atoi(arg); err == nil && j.pgid.Load() == 0 {
				j.pgid.Store(int64(g))
				if onGroup != nil {
					onGroup(g)
				}
				close(j.started)
			}
		case 'E':
			end()
		}
	}}
	return j
}

// markScanner passes a stream on to sink up to the job's end marker, taking the marker
// lines ("<mark>B<pgid>", "<mark>E<code>") out. Bytes after the end are dropped. It holds
// back at most a marker's length plus a short line. Written by one goroutine.
type markScanner struct {
	mark    []byte
	sink    io.Writer
	onLine  func(kind byte, arg string)
	pending []byte
	ended   bool
}

// maxMarkLine bounds what may follow a marker on its line.
const maxMarkLine = 24

func (m *markScanner) Write(p []byte) (int, error) {
	n := len(p)
	if m.ended {
		return n, nil
	}
	m.pending = append(m.pending, p...)
	for !m.ended {
		i := bytes.Index(m.pending, m.mark)
		if i < 0 {
			// Keep what could be the start of a marker.
			if keep := len(m.mark) - 1; len(m.pending) > keep {
				m.flush(len(m.pending) - keep)
			}
			return n, nil
		}
		rest := m.pending[i+len(m.mark):]
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			if len(rest) > maxMarkLine { // not a marker line after all: output
				m.flush(i + len(m.mark))
				continue
			}
			m.flush(i)
			return n, nil
		}
		line := string(rest[:j])
		m.flush(i)
		m.pending = append(m.pending[:0], m.pending[len(m.mark)+j+1:]...)
		if line == "" {
			continue
		}
		if line[0] == 'E' {
			m.ended = true
		}
		m.onLine(line[0], line[1:])
	}
	return n, nil
}

// flush passes the first k pending bytes on.
func (m *markScanner) flush(k int) {
	if k <= 0 {
		return
	}
	_, _ = m.sink.Write(m.pending[:k])
	m.pending = append(m.pending[:0], m.pending[k:]...)
}

// newMark returns a fresh random marker: nothing a command prints can end its output
// early except by guessing 128 random bits.
func newMark(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "@nexo:" + hex.EncodeToString(b[:]) + ":"
}

// encodeCommand writes cmd on one line for serverScript's printf %b: a backslash
// becomes "\\", control bytes (newline included) "\0ooo"; other bytes pass as they are.
func encodeCommand(cmd string) string {
	var b bytes.Buffer
	b.Grow(len(cmd) + 16)
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\0%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
