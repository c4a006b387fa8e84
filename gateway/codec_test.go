package gateway

import (
	"net/http"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
)

// uiOrigin is the embedded Web UI's origin as `worker --dev` allows it.
const uiOrigin = "http://127.0.0.1:8233"

func codecServer(t *testing.T, tokens []Token) *Server {
	t.Helper()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return newServer(t, &fakeRuns{}, Options{
		Tokens:          tokens,
		ExternalStorage: payloads.ExternalStorage(store, 0),
		CodecOrigins:    []string{uiOrigin},
	})
}

func payloadsJSON(t *testing.T, ps ...*commonpb.Payload) string {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readPayloads(t *testing.T, resp *http.Response) []*commonpb.Payload {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("decode payloads: %v\n%.300s", err, body)
	}
	return out.Payloads
}

// fromUI is what the Web UI's fetch sends: its origin, and the namespace.
func fromUI(extra map[string]string) map[string]string {
	h := map[string]string{"Origin": uiOrigin, "Sec-Fetch-Site": "same-site", "X-Namespace": "default"}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// TestCodecDecodesOffloadedPayloads: a payload over the threshold encodes to a reference
// (the blob is in the store), and decode or download of that reference returns the
// original, as the Web UI asks for it from its own origin.
func TestCodecDecodesOffloadedPayloads(t *testing.T) {
	t.Parallel()
	s := codecServer(t, nil)
	big, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"doc": strings.Repeat("d", 300<<10)})
	if err != nil {
		t.Fatal(err)
	}
	small, _ := converter.GetDefaultDataConverter().ToPayload("small")

	encoded := readPayloads(t, do(t, s, request{method: "POST", path: "/codec/encode", body: payloadsJSON(t, big, small), header: fromUI(nil)}))
	if !payloads.IsReference(encoded[0]) || !proto.Equal(encoded[1], small) {
		t.Fatalf("encode: want a reference and the small payload inline, got %v / %v", encoded[0].GetMetadata(), encoded[1].GetMetadata())
	}
	claim := payloadsJSON(t, encoded...)

	for _, path := range []string{"/codec/decode", "/codec/download"} {
		resp := do(t, s, request{method: "POST", path: path, body: payloadsJSON(t, encoded[0]), header: fromUI(nil)})
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != uiOrigin {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", path, got, uiOrigin)
		}
		if out := readPayloads(t, resp); len(out) != 1 || !proto.Equal(out[0], big) {
			t.Errorf("%s of the claim did not return the original payload", path)
		}
	}
	// What the UI sends: references kept, so it can offer a download instead.
	out := readPayloads(t, do(t, s, request{method: "POST", path: "/codec/decode?preserveStorageRefs=true", body: claim, header: fromUI(nil)}))
	if !proto.Equal(out[0], encoded[0]) || !proto.Equal(out[1], small) {
		t.Errorf("decode?preserveStorageRefs=true changed the payloads")
	}
	// A decode body larger than the API's 1 MiB limit: an event with a payload just under
	// a raised offload threshold.
	large, _ := converter.GetDefaultDataConverter().ToPayload(strings.Repeat("l", 1500<<10))
	if out := readPayloads(t, do(t, s, request{method: "POST", path: "/codec/decode?preserveStorageRefs=true", body: payloadsJSON(t, large), header: fromUI(nil)})); !proto.Equal(out[0], large) {
		t.Errorf("decode of a 1.5 MiB inline payload changed it")
	}
}

func TestCodecCORS(t *testing.T) {
	t.Parallel()
	s := codecServer(t, nil)
	preflight := func(origin string) *http.Response {
		return do(t, s, request{method: "OPTIONS", path: "/codec/decode", header: map[string]string{
			"Origin":                         origin,
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "content-type,x-namespace,authorization",
		}})
	}
	resp := preflight(uiOrigin)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight from the UI: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	h := resp.Header
	if h.Get("Access-Control-Allow-Origin") != uiOrigin || h.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("preflight: Allow-Origin %q, Allow-Credentials %q", h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Credentials"))
	}
	for _, want := range []string{"POST", "OPTIONS"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), want) {
			t.Errorf("Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), want)
		}
	}
	for _, want := range []string{"content-type", "x-namespace", "authorization"} {
		if !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), want) {
			t.Errorf("Allow-Headers %q lacks %s", h.Get("Access-Control-Allow-Headers"), want)
		}
	}

	other := "http://evil.example"
	if resp := preflight(other); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from %s: status %d, Allow-Origin %q; want 403 and no CORS answer", other, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp = do(t, s, request{method: "POST", path: "/codec/decode", body: payloadsJSON(t),
		header: map[string]string{"Origin": other, "Sec-Fetch-Site": "cross-site"}})
	wantProblem(t, resp, http.StatusForbidden, `origin "http://evil.example" may not call the codec endpoint`)

	// The codec's origins do not open the rest of the API to the UI's page.
	resp = do(t, s, request{method: "POST", path: "/v1/runs", body: `{"workflow":"DocumentApproval"}`, header: fromUI(nil)})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("POST /v1/runs from the UI's origin: status %d, Allow-Origin %q; want 403 without CORS", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestCodecAuth(t *testing.T) {
	t.Parallel()
	s := codecServer(t, testTokens)
	body := payloadsJSON(t)
	tests := []struct {
		name   string
		path   string
		header map[string]string
		want   int
	}{
		{"no token", "/codec/decode", fromUI(nil), http.StatusUnauthorized},
		{"the UI's own access token", "/codec/decode", fromUI(map[string]string{"Authorization": "Bearer eyJ-an-oidc-token"}), http.StatusUnauthorized},
		{"read token decodes", "/codec/decode", fromUI(map[string]string{"Authorization": "Bearer " + readerSecret}), http.StatusOK},
		{"read token downloads", "/codec/download", fromUI(map[string]string{"Authorization": "Bearer " + readerSecret}), http.StatusOK},
		{"read token may not encode", "/codec/encode", fromUI(map[string]string{"Authorization": "Bearer " + readerSecret}), http.StatusForbidden},
		{"operate token encodes", "/codec/encode", fromUI(map[string]string{"Authorization": "Bearer " + operatorSecret}), http.StatusOK},
		{"approve token may not decode", "/codec/decode", fromUI(map[string]string{"Authorization": "Bearer " + approverSecret}), http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, s, request{method: "POST", path: tt.path, body: body, header: tt.header})
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.want, readBody(t, resp))
			}
			// The UI must be able to read the refusal rather than see a network error.
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != uiOrigin {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, uiOrigin)
			}
		})
	}

	// With "include credentials", the page login's cookie reaches the codec; the UI
	// cannot send the session's CSRF token, and needs none here.
	cookie := login(t, s, readerSecret)
	resp := do(t, s, request{method: "POST", path: "/codec/decode", body: body, header: fromUI(map[string]string{"Cookie": cookie.Name + "=" + cookie.Value})})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("decode with the session cookie: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	// A preflight carries no credentials and is answered without them.
	resp = do(t, s, request{method: "OPTIONS", path: "/codec/decode", header: map[string]string{"Origin": uiOrigin, "Access-Control-Request-Method": "POST"}})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight on a gateway with tokens: status %d", resp.StatusCode)
	}
}

func TestNoCodecWithoutExternalStorage(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{}, Options{})
	resp := do(t, s, request{method: "POST", path: "/codec/decode", body: payloadsJSON(t)})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /codec/decode without External Storage: status %d, want 404", resp.StatusCode)
	}
}

// TestCodecBodyOverTheLimitIs413: a body one byte over 16 MiB was answered 400 by the SDK's
// handler; it is a 413 naming the limit, as every other route answers.
func TestCodecBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	s := codecServer(t, nil)
	big := `{"payloads":[{"data":"` + strings.Repeat("A", codecMaxBody) + `"}]}`
	resp := do(t, s, request{method: "POST", path: "/codec/decode", body: big, header: fromUI(map[string]string{"Content-Type": "application/json"})})
	wantProblem(t, resp, http.StatusRequestEntityTooLarge, "larger than 16777216 bytes")
	ok := payloadsJSON(t, &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"hi"`)})
	if resp := do(t, s, request{method: "POST", path: "/codec/decode", body: ok, header: fromUI(map[string]string{"Content-Type": "application/json"})}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a body under the limit: status %d, %s", resp.StatusCode, readBody(t, resp))
	}
}

// TestDotSegmentsAreRefusedNotRedirected: GET /v1/runs/r1/artifacts/.. was a 307 to
// /v1/runs/r1, another resource; it is a 400.
func TestDotSegmentsAreRefusedNotRedirected(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{}, Options{})
	for _, p := range []string{"/v1/runs/r1/artifacts/..", "/v1/runs/r1/artifacts/./a", "/v1/runs/../approvals"} {
		resp := do(t, s, request{method: "GET", path: p})
		wantProblem(t, resp, http.StatusBadRequest, "has a . or .. segment")
	}
}
