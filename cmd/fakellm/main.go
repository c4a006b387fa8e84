// Command fakellm serves an OpenAI-compatible chat completions API that replays a JSON
// script of replies: run agents offline, with no key and no network.
//
//	go run ./cmd/fakellm --script examples/scribe.script.json --addr 127.0.0.1:8799
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/nexo-temporal/nexo/fakellm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8799", "listen address")
	script := flag.String("script", "", "JSON file: an array of replies")
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
	fmt.Printf("fake model at http://%s/v1 replaying %s\n", *addr, *script)
	if err := http.ListenAndServe(*addr, srv); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}
