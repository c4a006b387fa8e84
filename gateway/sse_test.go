package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// sseMsg is one Server-Sent Events message.
type sseMsg struct{ id, event, data string }

// sseReader reads messages from a stream, skipping comments and retry-only blocks.
type sseReader struct{ r *bufio.Reader }

func (s sseReader) next() (sseMsg, error) {
	var m sseMsg
	has := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return m, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if has {
				return m, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			m.id, has = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			m.event, has = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			m.data, has = strings.TrimPrefix(line, "data: "), true
		}
	}
}

// openStream GETs the run's event stream from a live server.
func openStream(t *testing.T, url string, header map[string]string) (*http.Response, sseReader) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, sseReader{bufio.NewReader(resp.Body)}
}

func withEvents(rec api.Record, status api.Status, n int) api.Record {
	rec.Status = status
	rec.Events = nil
	for i := 1; i <= n; i++ {
		rec.Events = append(rec.Events, api.Event{Seq: int64(i), Type: "step", Data: json.RawMessage(`{"i":1}`), At: t0})
	}
	if status != api.StatusSuspended {
		rec.State = map[string]json.RawMessage{}
	}
	return rec
}

// TestEventStreamIsLive: each record Follow reports reaches the client before the next
// one exists (the stream is flushed, not buffered), statuses are announced, and the
// stream ends when the run closes.
func TestEventStreamIsLive(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	base := docSuspended()
	f := &fakeRuns{follow: func(ctx context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
		if id != base.ID {
			return api.Record{}, &runs.NotFoundError{ID: id}
		}
		steps := []api.Record{withEvents(base, api.StatusRunning, 1), base, withEvents(base, api.StatusDone, 5)}
		for i, rec := range steps {
			if i > 0 {
				select {
				case <-next:
				case <-ctx.Done():
					return rec, ctx.Err()
				}
			}
			if fn(rec) {
				return rec, nil
			}
		}
		return steps[len(steps)-1], nil
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()

	resp, sse := openStream(t, srv.URL+"/v1/runs/run-doc/events", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			m, err := sse.next()
			if err != nil {
				t.Fatalf("read stream: %v (want %s)", err, w)
			}
			got := m.event + "#" + m.id
			if got != w {
				t.Fatalf("message %s (data %s), want %s", got, m.data, w)
			}
			if m.event == "" {
				var ev api.Event
				if err := json.Unmarshal([]byte(m.data), &ev); err != nil || "#"+itoa(ev.Seq) != got {
					t.Fatalf("event data %s does not match its id %s", m.data, m.id)
				}
			}
			if m.event == "status" || m.event == "end" {
				var st StreamStatus
				if err := json.Unmarshal([]byte(m.data), &st); err != nil || st.ID != "run-doc" {
					t.Fatalf("%s data = %s", m.event, m.data)
				}
				if st.Status == api.StatusSuspended && (st.Pending == nil || st.Pending.CallID != SuspendCallID || st.Pending.Reason != "awaiting approval") {
					t.Fatalf("suspended status without what it waits for: %s", m.data)
				}
			}
		}
	}
	expect("#1", "status#")
	next <- struct{}{}
	expect("#2", "#3", "status#")
	next <- struct{}{}
	expect("#4", "#5", "status#", "end#")
	if _, err := sse.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after end: %v, want the server to close the stream", err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestEventStreamResumes: a reconnecting EventSource sends Last-Event-ID and gets only
// what it missed.
func TestEventStreamResumes(t *testing.T) {
	t.Parallel()
	done := withEvents(docSuspended(), api.StatusDone, 5)
	f := &fakeRuns{follow: func(_ context.Context, _ string, fn func(api.Record) bool) (api.Record, error) {
		fn(done)
		return done, nil
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		query  string
		header map[string]string
		want   string
	}{
		{"Last-Event-ID", "", map[string]string{"Last-Event-ID": "3"}, "#4 #5 status# end#"},
		{"Last-Event-ID beats after", "?after=1", map[string]string{"Last-Event-ID": "4"}, "#5 status# end#"},
		{"after", "?after=5", nil, "status# end#"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sse := openStream(t, srv.URL+"/v1/runs/run-doc/events"+tc.query, tc.header)
			var got []string
			for {
				m, err := sse.next()
				if err != nil {
					break
				}
				got = append(got, m.event+"#"+m.id)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("messages %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func TestEventStreamErrors(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{follow: func(_ context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
		if id == "nope" {
			return api.Record{}, &runs.NotFoundError{ID: id}
		}
		rec := withEvents(docSuspended(), api.StatusRunning, 1)
		fn(rec)
		return rec, &runs.NoWorkerError{ID: id, TaskQueue: "nexo", Err: errors.New("deadline exceeded")}
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()

	resp, _ := openStream(t, srv.URL+"/v1/runs/nope/events", nil)
	wantProblem(t, resp, 404, "no run nope")

	_, sse := openStream(t, srv.URL+"/v1/runs/run-doc/events", nil)
	var last sseMsg
	for {
		m, err := sse.next()
		if err != nil {
			break
		}
		last = m
	}
	var p Problem
	if last.event != "problem" || json.Unmarshal([]byte(last.data), &p) != nil || p.Status != 503 || !strings.Contains(p.Detail, "no worker answered") {
		t.Errorf("last message %+v, want a problem event with status 503", last)
	}
}

// TestShutdownEndsStreams: Serve's shutdown does not wait for a run to close.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{follow: func(ctx context.Context, _ string, fn func(api.Record) bool) (api.Record, error) {
		rec := withEvents(docSuspended(), api.StatusRunning, 1)
		fn(rec)
		<-ctx.Done()
		return rec, ctx.Err()
	}}
	s := newServer(t, f, Options{})
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	_, sse := openStream(t, "http://"+ln.Addr().String()+"/v1/runs/run-doc/events", nil)
	if m, err := sse.next(); err != nil || m.id != "1" {
		t.Fatalf("first message %+v, %v", m, err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after shutdown = %v, want nil", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return within 4s of shutdown with a stream open")
	}
}
