package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestPayloadOverTemporalsLimit: a 3 MB document id, which Temporal refuses in a payload
// (2 MB), goes through a whole DocumentApproval run started by the real starter: its
// input, the activities' inputs and results, the run record (a query result) and the
// workflow's result are stored in the blob store by External Storage, and history holds
// references only. The raw history replays with the workers' External Storage, the
// gateway's codec endpoint reads a reference back, and the embedded Web UI is pointed at it.
func TestPayloadOverTemporalsLimit(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	ctx := context.Background()
	docID := strings.Repeat("d", 3<<20)
	input := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(input, []byte(`{"doc_id":"`+docID+`","approved":true}`), 0o644); err != nil {
		t.Fatal(err)
	}

	// A client without External Storage (how the platform dialed before): refused.
	raw, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + strconv.Itoa(p.frontend)})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, err = raw.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "refused", TaskQueue: api.DefaultTaskQueue},
		demo.DocumentApprovalName, demo.DocumentApprovalInput{DocID: docID, Approved: true})
	if err == nil {
		t.Fatal("a 3 MB input was accepted without External Storage; this test proves nothing against this server")
	}
	t.Logf("without External Storage: %v", err)

	const id = "big-document"
	r := p.starter("run", "DocumentApproval", "--id", id, "--input", "@"+input, "--wait")
	if r.code != 0 || !strings.Contains(r.stderr, "is done") {
		t.Fatalf("run --wait: exit %d\nstdout: %.500s\nstderr: %.500s\nworker:\n%s", r.code, r.stdout, r.stderr, p.output())
	}
	rec := p.record(id)
	var res demo.DocumentApprovalResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Published != "published/"+docID {
		t.Fatalf("result: %v, published %d bytes, want published/<the 3 MB id>", err, len(res.Published))
	}

	// History: references, not bytes.
	hist := rawHistory(t, raw, id)
	var refs []*commonpb.Payload
	largest := 0
	err = proxy.VisitPayloads(ctx, hist, proxy.VisitPayloadsOptions{
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, pl := range ps {
				largest = max(largest, proto.Size(pl))
				if payloads.IsReference(pl) {
					refs = append(refs, pl)
				}
			}
			return ps, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The run's input, FetchDocument's input and result, PublishDocument's input and
	// result, and the run's result are each at least 3 MB.
	if len(refs) < 6 {
		t.Errorf("history holds %d external storage references, want at least 6", len(refs))
	}
	if largest >= payloads.DefaultThreshold {
		t.Errorf("largest payload in history is %d bytes, want under %d", largest, payloads.DefaultThreshold)
	}
	if size := proto.Size(hist); size > 64<<10 {
		t.Errorf("history is %d bytes for %d events, want a few KB", size, len(hist.Events))
	}
	t.Logf("history: %d events, %d bytes, %d references, largest payload %d bytes", len(hist.Events), proto.Size(hist), len(refs), largest)

	// The references replay with the workers' External Storage, and only with it.
	store, err := artifacts.Open(p.artifactsDir())
	if err != nil {
		t.Fatal(err)
	}
	replay := func(opts worker.WorkflowReplayerOptions) error {
		rp, err := worker.NewWorkflowReplayerWithOptions(opts)
		if err != nil {
			t.Fatal(err)
		}
		workflows.RegisterAll(rp)
		demo.Register(rp)
		// The replayer resolves references in the history it is given.
		return rp.ReplayWorkflowHistory(nil, proto.Clone(hist).(*historypb.History))
	}
	if err := replay(worker.WorkflowReplayerOptions{ExternalStorage: payloads.ExternalStorage(store, 0)}); err != nil {
		t.Errorf("replay with External Storage: %v", err)
	}
	if err := replay(worker.WorkflowReplayerOptions{}); err == nil {
		t.Errorf("replay without External Storage succeeded; the history holds no references?")
	}

	// The gateway's codec endpoint reads the run's input back, as the Web UI's download does.
	started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	if !payloads.IsReference(started) {
		t.Fatalf("the run's input is inline in history: %v", started.GetMetadata())
	}
	got := codecDownload(t, p, started)
	var in demo.DocumentApprovalInput
	if err := json.Unmarshal(got.GetData(), &in); err != nil || in.DocID != docID {
		t.Errorf("codec download: %v, doc_id of %d bytes, want the 3 MB id", err, len(in.DocID))
	}

	// The embedded Web UI is pointed at that endpoint, and the gateway lets the UI's pages
	// call it: the browser's preflight, then the credentialed POST, from either name of the
	// UI's origin.
	var settings struct {
		Codec struct {
			Endpoint           string
			IncludeCredentials bool
		}
	}
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/settings", p.ui), &settings)
	if want := fmt.Sprintf("http://127.0.0.1:%d/codec", p.gateway); settings.Codec.Endpoint != want || !settings.Codec.IncludeCredentials {
		t.Errorf("UI codec settings %+v, want endpoint %q with credentials", settings.Codec, want)
	}
	for _, origin := range []string{fmt.Sprintf("http://127.0.0.1:%d", p.ui), fmt.Sprintf("http://localhost:%d", p.ui)} {
		pre := codecRequest(t, p, http.MethodOptions, "/codec/decode", nil, map[string]string{"Origin": origin,
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-namespace"})
		if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("preflight from %s: %s, Allow-Origin %q", origin, pre.Status, pre.Header.Get("Access-Control-Allow-Origin"))
		}
		body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{started}})
		post := codecRequest(t, p, http.MethodPost, "/codec/decode?preserveStorageRefs=true", body, map[string]string{"Origin": origin,
			"Sec-Fetch-Site": "same-site", "Content-Type": "application/json", "X-Namespace": api.DefaultNamespace})
		if post.StatusCode != http.StatusOK || post.Header.Get("Access-Control-Allow-Origin") != origin || post.Header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("decode from %s: %s, Allow-Origin %q, Allow-Credentials %q", origin, post.Status,
				post.Header.Get("Access-Control-Allow-Origin"), post.Header.Get("Access-Control-Allow-Credentials"))
		}
	}
	other := codecRequest(t, p, http.MethodOptions, "/codec/decode", nil, map[string]string{"Origin": "http://127.0.0.1:1", "Access-Control-Request-Method": "POST"})
	if other.StatusCode != http.StatusForbidden {
		t.Errorf("preflight from an origin that is not the UI: %s, want 403", other.Status)
	}
}

// codecRequest sends one request to the platform's gateway and returns the response with
// its body read and closed.
func codecRequest(t *testing.T, p *platform, method, path string, body []byte, header map[string]string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", p.gateway, path), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestLargeSignalOffloaded: a resume (a signal) carrying 1 MB reaches the suspended run and
// its result, and stays out of history.
func TestLargeSignalOffloaded(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"s1"}`))
	p.waitStatus(id, api.StatusSuspended)
	approver := strings.Repeat("a", 1<<20)
	input := filepath.Join(t.TempDir(), "resume.json")
	if err := os.WriteFile(input, []byte(`{"approved":true,"approver":"`+approver+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.ok("resume", id, "--input", "@"+input)
	rec := p.waitStatus(id, api.StatusDone)
	var res demo.DocumentApprovalResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Approver != approver {
		t.Fatalf("result: %v, approver of %d bytes, want the 1 MB one", err, len(res.Approver))
	}
	signals := 0
	for _, ev := range rawHistory(t, p.dial(), id).Events {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			signals++
			if pl := a.GetInput().GetPayloads(); len(pl) != 1 || !payloads.IsReference(pl[0]) {
				t.Errorf("the signal's input is inline in history (%d bytes)", proto.Size(a.GetInput()))
			}
		}
	}
	if signals != 1 {
		t.Errorf("history holds %d signals, want the one resume", signals)
	}
}

// TestQueuedRunShowsOffloadedInput: a run that has not begun is read from history, where
// its large input is a reference; `show` reads it back from the blob store.
func TestQueuedRunShowsOffloadedInput(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	docID := strings.Repeat("q", 300<<10)
	input := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(input, []byte(`{"doc_id":"`+docID+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const id = "queued-big"
	p.ok("run", "DocumentApproval", "--id", id, "--start-delay", "1h", "--input", "@"+input)
	rec := p.record(id)
	var in demo.DocumentApprovalInput
	if rec.Status != api.StatusQueued || json.Unmarshal(rec.Payload, &in) != nil || in.DocID != docID {
		t.Fatalf("show of a queued run: status %s, payload of %d bytes; want queued with the 300 KB input", rec.Status, len(rec.Payload))
	}
}

func rawHistory(t *testing.T, c client.Client, id string) *historypb.History {
	t.Helper()
	var h historypb.History
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return &h
}

// codecDownload posts one reference to the platform gateway's /codec/download.
func codecDownload(t *testing.T, p *platform, ref *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{ref}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/codec/download", p.gateway), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", api.DefaultNamespace)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("codec download: %s: %.300s", resp.Status, b)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal(b, &out); err != nil || len(out.Payloads) != 1 {
		t.Fatalf("codec download answered %.300s (%v)", b, err)
	}
	return out.Payloads[0]
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, v) != nil {
		t.Fatalf("GET %s: %s: %.300s", url, resp.Status, b)
	}
}

// TestRecordOffloadedHistory records workflows/testdata/document_approval_offloaded.json: a
// DocumentApproval run whose payloads External Storage offloaded (a 1 KiB threshold keeps
// the fixture small), with the blobs its references name in workflows/testdata/blobs, so
// the replay test covers histories that hold references. Like TestRecordHistories it runs
// only with NEXO_RECORD_HISTORIES=1.
func TestRecordOffloadedHistory(t *testing.T) {
	if os.Getenv("NEXO_RECORD_HISTORIES") != "1" {
		t.Skip("set NEXO_RECORD_HISTORIES=1 to re-record workflows/testdata")
	}
	// A fixture is never overwritten (see TestRecordHistories).
	fixture := filepath.Join("..", "workflows", "testdata", "document_approval_offloaded.json")
	if _, err := os.Stat(fixture); err == nil {
		t.Skipf("%s exists: kept", fixture)
	}
	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, "NEXO_PAYLOADS_OFFLOAD_THRESHOLD=1024")
	p.start()
	in, _ := json.Marshal(demo.DocumentApprovalInput{DocID: strings.Repeat("o", 2000), Approved: true})
	const id = "offloaded"
	p.ok("run", "DocumentApproval", "--id", id, "--input", string(in), "--wait")
	hist := rawHistory(t, p.dial(), id)

	store, err := artifacts.Open(p.artifactsDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "workflows", "testdata")
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	refs := 0
	err = proxy.VisitPayloads(context.Background(), hist, proxy.VisitPayloadsOptions{
		Visitor: func(vpc *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, pl := range ps {
				if !payloads.IsReference(pl) {
					continue
				}
				var ref sdkpb.ExternalStorageReference
				if err := protojson.Unmarshal(pl.GetData(), &ref); err != nil {
					return nil, err
				}
				sum := ref.GetClaimData()[payloads.ClaimKey]
				b, err := store.GetBlob(vpc.Context, sum)
				if err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(dir, "blobs", sum), b, 0o644); err != nil {
					return nil, err
				}
				refs++
			}
			return ps, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs == 0 {
		t.Fatal("no payload was offloaded; the fixture would not test references")
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fixture, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events with %d references", len(hist.Events), refs)
}
