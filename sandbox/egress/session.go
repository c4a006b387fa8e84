package egress

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// Session is the proxy of one sandbox: its socket, its policy, the records of its
// requests. Safe for concurrent use.
type Session struct {
	// Socket is the unix socket the sandbox's forwarder connects to.
	Socket string
	// Token is what the forwarder sends first on each connection: a connection without
	// it is closed unanswered. The sandbox's forwarder gets it through a pipe.
	Token string

	p   *Proxy
	pol *policy
	ln  net.Listener
	srv *http.Server
	// transport sends the session's plain and decrypted requests; its dial goes to the
	// address dialTarget checked (carried in the request's context).
	transport *http.Transport

	mu       sync.Mutex
	records  []api.EgressRecord
	dropped  int
	inflight int
	idle     chan struct{} // closed when inflight is 0
	conns    map[net.Conn]struct{}
	closed   bool
}

type targetKey struct{}

// quiet drops the HTTP servers' own logs (a sandbox's malformed request is its answer,
// not the worker's log line).
var quiet = log.New(io.Discard, "", 0)

func newSession(p *Proxy, pol *policy, sock string, ln net.Listener) *Session {
	s := &Session{Socket: sock, p: p, pol: pol, ln: ln, idle: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(s.idle)
	dialer := &net.Dialer{Timeout: p.opts.DialTimeout}
	s.transport = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			addr, _ := ctx.Value(targetKey{}).(string)
			if addr == "" {
				return nil, errors.New("egress: no checked address for this request")
			}
			return dialer.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig:       &tls.Config{RootCAs: p.opts.UpstreamRoots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   p.opts.DialTimeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		// The pooled connection of a host was dialled to the address checked for it; a
		// request's own check decides whether it may go at all.
		DisableCompression: true,
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(c net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch st {
			case http.StateNew:
				s.conns[c] = struct{}{}
			case http.StateHijacked, http.StateClosed:
				delete(s.conns, c)
			}
		},
		ErrorLog: quiet,
	}
	return s
}

func (s *Session) serve() { _ = s.srv.Serve(newTokenListener(s.ln, []byte(s.Token))) }

// tokenMax bounds the token line.
const tokenMax = 128

// tokenListener passes on only the connections that start with the session's token line;
// each is checked on its own goroutine, so a connection that sends nothing holds up no
// other.
type tokenListener struct {
	net.Listener
	ok   chan net.Conn
	err  chan error
	done chan struct{}
	once sync.Once
}

func newTokenListener(ln net.Listener, token []byte) *tokenListener {
	l := &tokenListener{Listener: ln, ok: make(chan net.Conn), err: make(chan error, 1), done: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				l.err <- err
				return
			}
			go func() {
				if !checkToken(c, token) {
					c.Close()
					return
				}
				select {
				case l.ok <- c:
				case <-l.done:
					c.Close()
				}
			}()
		}
	}()
	return l
}

func (l *tokenListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ok:
		return c, nil
	case err := <-l.err:
		l.err <- err // every later Accept fails too
		return nil, err
	}
}

func (l *tokenListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// checkToken reads the first line of c, byte by byte (nothing after it is consumed), and
// compares it with token in constant time.
func checkToken(c net.Conn, token []byte) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	line := make([]byte, 0, len(token))
	b := make([]byte, 1)
	for len(line) <= tokenMax {
		if _, err := c.Read(b); err != nil {
			return false
		}
		if b[0] == '\n' {
			return subtle.ConstantTimeCompare(line, token) == 1
		}
		line = append(line, b[0])
	}
	return false
}

// Close stops the session: no new connection, open ones cut. The proxy forgets it, so
// opening its key again makes a fresh one.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.p.forget(s)
	err := s.srv.Close()
	s.transport.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Drain returns the records of the requests made since the last Drain (at most
// api.MaxEgressRecords) and how many more there were. It first waits, up to wait, for
// requests still being answered, so a call's records are complete when its command
// has ended.
func (s *Session) Drain(wait time.Duration) ([]api.EgressRecord, int) {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, dropped := s.records, s.dropped
	s.records, s.dropped = nil, 0
	return recs, dropped
}

func (s *Session) record(r api.EgressRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) >= api.MaxEgressRecords {
		s.dropped++
		return
	}
	s.records = append(s.records, r)
}

func (s *Session) begin() {
	s.mu.Lock()
	if s.inflight == 0 {
		s.idle = make(chan struct{})
	}
	s.inflight++
	s.mu.Unlock()
}

func (s *Session) end() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// refuse answers a request the proxy will not make: the status and a one-line reason.
func refuse(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	fmt.Fprintln(w, reason)
}

func (s *Session) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.begin()
	defer s.end()
	switch {
	case r.Method == http.MethodConnect:
		s.connect(w, r)
	case r.URL.IsAbs() && r.URL.Host != "":
		s.forward(w, r, r.URL.Scheme)
	default:
		// Origin-form ("GET /"): a request to the proxy itself. It has no pages, no admin
		// surface, nothing of its own to answer.
		reason := "this is the sandbox's egress proxy: it has nothing of its own to serve; send it proxy requests (an absolute http:// URL, or CONNECT for https)"
		s.record(api.EgressRecord{Host: normHost(hostOnly(r.Host)), Method: r.Method, Status: http.StatusBadRequest, Denied: "request addressed to the proxy itself"})
		refuse(w, http.StatusBadRequest, reason)
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// splitTarget reads host and port of an authority, with def as the port when absent.
func splitTarget(authority string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(authority)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return normHost(authority), def, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not between 1 and 65535", ps)
	}
	return normHost(host), port, nil
}

// hopHeaders belong to one connection, not to the request: never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, k := range strings.Split(f, ",") {
			if k = strings.TrimSpace(k); k != "" {
				h.Del(k)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// forward makes one plain request (or one decrypted from a tunnel, scheme https) for the
// sandbox and copies the answer back.
func (s *Session) forward(w http.ResponseWriter, r *http.Request, scheme string) {
	def := 80
	if scheme == "https" {
		def = 443
	}
	if scheme != "http" && scheme != "https" {
		s.record(api.EgressRecord{Host: normHost(r.URL.Hostname()), Method: r.Method, Status: http.StatusBadRequest, Denied: "scheme " + scheme + " is not proxied"})
		refuse(w, http.StatusBadRequest, "the egress proxy forwards http:// and https:// requests only")
		return
	}
	host, port, err := splitTarget(r.URL.Host, def)
	if err != nil {
		s.record(api.EgressRecord{Host: normHost(r.URL.Hostname()), Method: r.Method, Status: http.StatusBadRequest, Denied: err.Error()})
		refuse(w, http.StatusBadRequest, "bad request target: "+err.Error())
		return
	}
	addr, reason := s.dialTarget(r.Context(), host, port)
	if reason != "" {
		s.record(api.EgressRecord{Host: host, Port: port, Method: r.Method, Status: http.StatusForbidden, Denied: reason})
		refuse(w, http.StatusForbidden, reason)
		return
	}
	s.forwardChecked(w, r, host, port, addr)
}

func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// upstreamError is an upstream failure in a line, without the checked address's internals.
func upstreamError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}

// connect opens a tunnel: a plain one to a host the proxy only lets through, or one it
// decrypts (with the worker's CA) to add a header.
func (s *Session) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitTarget(r.Host, 443)
	if err != nil {
		s.record(api.EgressRecord{Host: normHost(hostOnly(r.Host)), Method: http.MethodConnect, Status: http.StatusBadRequest, Denied: err.Error()})
		refuse(w, http.StatusBadRequest, "bad CONNECT target: "+err.Error())
		return
	}
	rec := api.EgressRecord{Host: host, Port: port, Method: http.MethodConnect}
	addr, reason := s.dialTarget(r.Context(), host, port)
	if reason != "" {
		rec.Status, rec.Denied = http.StatusForbidden, reason
		s.record(rec)
		refuse(w, http.StatusForbidden, reason)
		return
	}
	if _, ok := s.pol.inject[host]; ok {
		s.intercept(w, host, port, addr)
		return
	}
	upstream, err := (&net.Dialer{Timeout: s.p.opts.DialTimeout}).DialContext(r.Context(), "tcp", addr)
	if err != nil {
		rec.Status, rec.Error = http.StatusBadGateway, upstreamError(err)
		s.record(rec)
		refuse(w, http.StatusBadGateway, fmt.Sprintf("egress to %s failed: %s", net.JoinHostPort(host, strconv.Itoa(port)), rec.Error))
		return
	}
	defer upstream.Close()
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rec.Status, rec.Error = http.StatusInternalServerError, "hijack: "+err.Error()
		s.record(rec)
		return
	}
	defer client.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	rec.Status = http.StatusOK
	rec.BytesUp, rec.BytesDown = splice(client, buf.Reader, upstream)
	s.record(rec)
}

// splice copies both ways until both sides are done, and says how many bytes went each
// way. A side that ends closes its write half of the other, so a half-closed connection
// still drains.
func splice(client net.Conn, clientBuf *bufio.Reader, upstream net.Conn) (up, down int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, _ = io.Copy(upstream, io.MultiReader(io.LimitReader(clientBuf, int64(clientBuf.Buffered())), client))
		closeWrite(upstream)
	}()
	down, _ = io.Copy(client, upstream)
	closeWrite(client)
	wg.Wait()
	return up, down
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// intercept answers a CONNECT to a host with an inject rule: the proxy is the TLS server
// the sandbox talks to (a leaf of the worker's CA for host), and each request it reads
// goes on through forward, over TLS to the checked address, with the header added.
func (s *Session) intercept(w http.ResponseWriter, host string, port int, addr string) {
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.record(api.EgressRecord{Host: host, Port: port, Method: http.MethodConnect, Status: http.StatusInternalServerError, Error: "hijack: " + err.Error()})
		return
	}
	defer client.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	leaf, err := s.p.ca.leaf(host)
	if err != nil {
		s.record(api.EgressRecord{Host: host, Port: port, Method: http.MethodConnect, Status: http.StatusOK, Error: err.Error()})
		return
	}
	tlsConn := tls.Server(&bufConn{Conn: client, r: buf.Reader}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = tlsConn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.record(api.EgressRecord{Host: host, Port: port, Method: http.MethodConnect, Status: http.StatusOK,
			Error: "TLS handshake with the sandbox failed (does the command trust the CA bundle in SSL_CERT_FILE?): " + err.Error()})
		return
	}
	authority := net.JoinHostPort(host, strconv.Itoa(port))
	inner := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The tunnel is to host:port whatever the request's Host says: the check
			// was made for it.
			r.URL.Scheme, r.URL.Host = "https", authority
			s.forwardChecked(w, r, host, port, addr)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          quiet,
	}
	_ = inner.Serve(&oneConn{c: tlsConn})
}

// forwardChecked is forward for a request inside a tunnel whose target was checked.
func (s *Session) forwardChecked(w http.ResponseWriter, r *http.Request, host string, port int, addr string) {
	rec := api.EgressRecord{Host: host, Port: port, Method: r.Method}
	ctx := context.WithValue(r.Context(), targetKey{}, addr)
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.Host = bracket(host)
	if port != map[string]int{"http": 80, "https": 443}[r.URL.Scheme] {
		out.Host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	out.Header = r.Header.Clone()
	stripHop(out.Header)
	if in, ok := s.pol.inject[host]; ok {
		out.Header.Set(in.header, in.value)
		rec.Injected = in.header
	}
	up := &countReader{r: r.Body}
	if r.Body == nil || r.ContentLength == 0 {
		out.Body = nil
	} else {
		out.Body = up
	}
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		rec.Status, rec.Error, rec.BytesUp = http.StatusBadGateway, upstreamError(err), up.n
		s.record(rec)
		refuse(w, http.StatusBadGateway, fmt.Sprintf("egress to %s failed: %s", out.Host, rec.Error))
		return
	}
	defer resp.Body.Close()
	stripHop(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	rec.Status, rec.BytesUp, rec.BytesDown = resp.StatusCode, up.n, n
	s.record(rec)
}

type countReader struct {
	r io.ReadCloser
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countReader) Close() error { return c.r.Close() }

// bufConn reads what the HTTP server had already buffered of a hijacked connection first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConn is a listener that yields one connection, then waits until it is closed, so
// http.Server.Serve returns when the tunnel ends.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	c := l.c
	l.c = nil
	done := l.done
	l.mu.Unlock()
	if c != nil {
		return &closeNotify{Conn: c, once: &sync.Once{}, done: done}, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error { return nil }

func (l *oneConn) Addr() net.Addr { return &net.UnixAddr{Name: "egress-tunnel", Net: "unix"} }

type closeNotify struct {
	net.Conn
	once *sync.Once
	done chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}
