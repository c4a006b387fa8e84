// Command fakellm serves an OpenAI-compatible chat completions API that replays a JSON
// script of replies: run agents offline, with no key and no network.
//
//	go run ./cmd/fakellm --script examples/agents/scribe.script.json --addr 127.0.0.1:8799
//
// --index sequence answers the N-th distinct request with reply N (for agents whose thread
// is compacted); the default answers by the number of assistant messages in the thread.
// The script format (standing replies with "match", "repeat" with "{n}") is described in
// package fakellm.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/nexo-temporal/nexo/fakellm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8799", "listen address")
	script := flag.String("script", "", "JSON file: an array of replies")
	index := flag.String("index", "assistant", "which reply answers a request: assistant (by the thread's assistant messages) or sequence (the N-th distinct request)")
	flag.Parse()
	if *script == "" {
		fmt.Fprintln(os.Stderr, "fakellm: --script is required")
		os.Exit(2)
	}
	srv, err := fakellm.Load(*script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	if srv.Index, err = fakellm.ParseIndex(*index); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(2)
	}
	// Bind before saying where it serves: on a busy port the only line is the error.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakellm: %v (is another fakellm running? stop it or pick another --addr)\n", err)
		os.Exit(1)
	}
	fmt.Printf("fake model at http://%s/v1 replaying %s\n", ln.Addr(), *script)
	if err := http.Serve(ln, srv); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}
