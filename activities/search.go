package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nexo-temporal/nexo/api"
)

// Search limits (Nexo's): at most SearchResults results, each snippet cut at SearchSnippet
// characters.
const (
	SearchResults = 8
	SearchSnippet = 300
)

// Searcher is the web_search tool's backend: a search service with a JSON API in the
// SearXNG shape (GET <url>?q=...&format=json → {"results": [{"title","url","content"}]}).
// The operator configures its URL (search.url), so it is not subject to an agent's fetch
// allow-list; what it returns is untrusted text for the model.
type Searcher struct {
	URL    string
	APIKey string // sent as a bearer token when set (search.api_key_env)
	Client *http.Client
}

// NewSearcher returns a Searcher for the backend at rawURL.
func NewSearcher(rawURL, apiKey string) *Searcher {
	return &Searcher{URL: rawURL, APIKey: apiKey, Client: &http.Client{Timeout: 20 * time.Second}}
}

type searchResponse struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

// Search returns what the model sees for query.
func (s *Searcher) Search(ctx context.Context, query string) api.RunToolResult {
	u, err := url.Parse(s.URL)
	if err != nil {
		return toolError("web_search: the backend URL is invalid: %v", err)
	}
	q := u.Query()
	q.Set("q", query)
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return toolError("web_search: %v", err)
	}
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.Client.Do(req)
	if err != nil {
		return toolError("web_search failed: %s", redact(err.Error(), s.APIKey))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return toolError("web_search failed: the backend answered HTTP %d", resp.StatusCode)
	}
	var sr searchResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return toolError("web_search failed: the backend's answer is not the expected JSON: %v", err)
	}
	if len(sr.Results) == 0 {
		return api.RunToolResult{Content: "no results for " + query}
	}
	var b strings.Builder
	for i, r := range sr.Results {
		if i == SearchResults {
			break
		}
		fmt.Fprintf(&b, "%d. %s\n   %s\n   %s\n", i+1, strings.TrimSpace(r.Title), r.URL, cut(strings.TrimSpace(r.Content), SearchSnippet))
	}
	return api.RunToolResult{Content: strings.TrimRight(b.String(), "\n")}
}

// cut shortens s to at most n characters, never splitting one.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
