// Command receiver is the other end of the Notifications demo of docs/approvals.md: an
// approval bridge that checks each notification's signature and prints one line for it,
// where a real bridge would post to a chat or open a ticket. It is a starting point to
// copy, not part of the platform.
//
//	NOTIFY_SECRET=demo-secret go run ./examples/approvals/receiver [--addr 127.0.0.1:8802]
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/nexo-temporal/nexo/api"
)

// maxBody bounds a notification's body; the worker's are a few KB.
const maxBody = 1 << 20

func main() {
	addr := flag.String("addr", "127.0.0.1:8802", "address to listen on (the url of approvals.notify)")
	flag.Parse()
	secret := os.Getenv("NOTIFY_SECRET")
	if secret == "" {
		fmt.Fprintln(os.Stderr, "receiver: NOTIFY_SECRET is not set: export the secret the worker signs with (approvals.notify[].secret_env)")
		os.Exit(2)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "receiver: %v (another receiver running? pick another --addr and put it in approvals.notify[].url)\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "receiver: listening on http://%s/nexo\n", l.Addr())
	if err := http.Serve(l, handler(secret, os.Stdout)); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// handler answers 204 to a notification signed with secret, after printing it to out, and
// 401 to one whose X-Nexo-Signature does not match its body.
func handler(secret string, out io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a notification", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "read the body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if err := verify(secret, r.Header.Get("X-Nexo-Signature"), body); err != nil {
			fmt.Fprintf(out, "refused a notification: %v\n", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var n api.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			http.Error(w, "not a notification: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(out, describe(n))
		w.WriteHeader(http.StatusNoContent)
	})
}

// verify checks the signature over the exact bytes received.
func verify(secret, header string, body []byte) error {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(header), []byte(want)) {
		return errors.New("X-Nexo-Signature does not match the body (is NOTIFY_SECRET the worker's?)")
	}
	return nil
}

// describe is the line a human reads for n.
func describe(n api.Notification) string {
	s := fmt.Sprintf("%s  run %s  call %s  %s %s", n.Event, n.RunID, n.CallID, n.Tool, n.Detail)
	if d := n.Decision; d != nil {
		s += fmt.Sprintf("  %s by %s", d.Action, d.By)
		if d.Reason != "" {
			s += ": " + d.Reason
		}
	}
	return s
}
