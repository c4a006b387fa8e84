package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestHandler: a notification signed with the secret is printed and answered 204 (the
// worker counts it delivered); one signed otherwise is refused 401 and not printed as a
// notification.
func TestHandler(t *testing.T) {
	t.Parallel()
	const body = `{"event":"approval_decided","run_id":"r1","call_id":"1.1","tool":"write_file","detail":"notes.md",` +
		`"decision":{"approved":false,"action":"deny","by":"ada","reason":"not before the launch"}}`
	for _, tt := range []struct {
		name, signature string
		status          int
		line            string
	}{
		{"signed", sign("s3cret", body), http.StatusNoContent,
			"approval_decided  run r1  call 1.1  write_file notes.md  deny by ada: not before the launch\n"},
		{"other secret", sign("other", body), http.StatusUnauthorized,
			"refused a notification: X-Nexo-Signature does not match the body (is NOTIFY_SECRET the worker's?)\n"},
		{"unsigned", "", http.StatusUnauthorized,
			"refused a notification: X-Nexo-Signature does not match the body (is NOTIFY_SECRET the worker's?)\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			req := httptest.NewRequest(http.MethodPost, "/nexo", strings.NewReader(body))
			req.Header.Set("X-Nexo-Signature", tt.signature)
			w := httptest.NewRecorder()
			handler("s3cret", &out).ServeHTTP(w, req)
			if w.Code != tt.status || out.String() != tt.line {
				t.Errorf("got %d and %q, want %d and %q", w.Code, out.String(), tt.status, tt.line)
			}
		})
	}
}
