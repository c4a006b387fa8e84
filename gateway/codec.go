package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/nexo-temporal/nexo/api"
)

// The codec endpoint: the Temporal Web UI (and `temporal` CLI's --codec-endpoint) sends
// the payloads it shows to <endpoint>/decode, <endpoint>/download and <endpoint>/encode
// (Temporal's codec server protocol). Payloads offloaded by External Storage are only a
// reference in history; the UI shows their size, and /download reads the payload back from
// the blob store with the same External Storage every client of the platform has.
//
// The UI calls it from the browser, from its own origin, so these routes answer CORS for the
// origins in Options.CodecOrigins (with credentials, so a page login's cookie reaches
// them), and they are admitted from those origins despite the cross-origin check. Decoding
// reads like any GET does and needs scope read; encoding writes blobs, scope operate.

// codecPath is where the codec endpoint is mounted.
const codecPath = "/codec"

// codecMaxBody caps a codec request: the UI sends an event's payloads at once, each up to
// payloads.offload_threshold and base64-encoded in JSON, which a 1 MiB API body limit
// would cut off.
const codecMaxBody = 16 << 20

// codecAllowHeaders are the request headers the UI sends: the namespace always, the
// access token (and its extras) when its "pass access token" setting is on.
const codecAllowHeaders = "Content-Type, X-Namespace, Authorization, Authorization-Extras"

func (s *Server) codecRoutes() []route {
	if s.codec == nil {
		return nil
	}
	serve := s.codecBody
	return []route{
		// CSRF tokens defend state changes made with the cookie's authority from other
		// sites; here the origin check (only the gateway's pages and CodecOrigins) does
		// that, since the UI cannot know the session's CSRF token.
		{method: "POST", path: codecPath + "/decode", scope: api.ScopeRead, codec: true, csrfExempt: true, handle: serve},
		{method: "POST", path: codecPath + "/download", scope: api.ScopeRead, codec: true, csrfExempt: true, handle: serve},
		{method: "POST", path: codecPath + "/encode", scope: api.ScopeOperate, codec: true, csrfExempt: true, handle: serve},
		// The CORS preflight carries no credentials: public.
		{method: "OPTIONS", path: codecPath + "/{op}", codec: true, handle: s.codecPreflight},
	}
}

// codecBody reads the (bounded) request body before the SDK's codec handler does: the
// handler answers a body over the limit with a 400, where the client needs the 413 that
// says what to change.
func (s *Server) codecBody(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes, the codec endpoint's limit", tooLarge.Limit))
			return
		case err != nil:
			problem(w, r, http.StatusBadRequest, fmt.Sprintf("read the request body: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.codec.ServeHTTP(w, r)
}

// newCodec builds the codec handler over es (nil when es has no driver) and the origins
// policy.
func newCodec(es converter.ExternalStorage, origins []string) (http.Handler, map[string]bool, *http.CrossOriginProtection, error) {
	if len(es.Drivers) == 0 {
		return nil, nil, nil, nil
	}
	h, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: es})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("new gateway: codec endpoint: %w", err)
	}
	allowed := map[string]bool{}
	co := http.NewCrossOriginProtection()
	for _, o := range origins {
		o = strings.TrimSuffix(o, "/")
		if err := co.AddTrustedOrigin(o); err != nil {
			return nil, nil, nil, fmt.Errorf("new gateway: codec origin %q: %w", o, err)
		}
		allowed[o] = true
	}
	co.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, r, http.StatusForbidden, codecOriginRefused(r))
	}))
	return h, allowed, co, nil
}

func codecOriginRefused(r *http.Request) string {
	return fmt.Sprintf("origin %q may not call the codec endpoint; add it to gateway.codec_origins", r.Header.Get("Origin"))
}

// cors adds the CORS answer for an allowed Origin to every codec response, errors
// included, so the UI can read a 401 or 403 instead of seeing a network failure.
func (s *Server) cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if o := r.Header.Get("Origin"); s.codecOrigins[o] {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
		h.ServeHTTP(w, r)
	})
}

// codecPreflight answers the browser's OPTIONS before a codec POST.
func (s *Server) codecPreflight(w http.ResponseWriter, r *http.Request) {
	if !s.codecOrigins[r.Header.Get("Origin")] {
		problem(w, r, http.StatusForbidden, codecOriginRefused(r))
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", codecAllowHeaders)
	h.Set("Access-Control-Max-Age", "600")
	// A UI on a public address calling a gateway on this machine (Chrome's Private
	// Network Access) asks for this too.
	if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}
