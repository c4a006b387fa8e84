package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
)

func searchBackend(t *testing.T, rows int, status int, gotAuth *string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gotAuth != nil {
			*gotAuth = r.Header.Get("Authorization")
		}
		if r.URL.Query().Get("format") != "json" || r.URL.Query().Get("q") == "" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		var res []map[string]string
		for i := range rows {
			res = append(res, map[string]string{"title": fmt.Sprintf("Result %d", i+1),
				"url": fmt.Sprintf("https://example.com/%d", i+1), "content": strings.Repeat("é", 400)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/search"
}

func TestWebSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("at most 8 results, snippets cut at 300 characters", func(t *testing.T) {
		var auth string
		res := activities.NewSearcher(searchBackend(t, 20, 0, &auth), "sk-search").Search(ctx, "temporal")
		if res.IsError {
			t.Fatalf("error result: %s", res.Content)
		}
		if strings.Count(res.Content, "https://example.com/") != 8 || strings.Contains(res.Content, "Result 9") {
			t.Errorf("results:\n%s", res.Content)
		}
		for _, line := range strings.Split(res.Content, "\n") {
			if n := len([]rune(strings.TrimSpace(line))); n > 301 {
				t.Errorf("a line of %d characters: snippets are cut at 300", n)
			}
		}
		if auth != "Bearer sk-search" {
			t.Errorf("Authorization = %q", auth)
		}
	})
	t.Run("no results", func(t *testing.T) {
		res := activities.NewSearcher(searchBackend(t, 0, 0, nil), "").Search(ctx, "nothing")
		if res.IsError || !strings.Contains(res.Content, "no results") {
			t.Errorf("got %+v", res)
		}
	})
	t.Run("a failing backend is a result the model sees", func(t *testing.T) {
		res := activities.NewSearcher(searchBackend(t, 0, http.StatusInternalServerError, nil), "").Search(ctx, "x")
		if !res.IsError || !strings.Contains(res.Content, "search failed") {
			t.Errorf("got %+v", res)
		}
	})
	t.Run("an unreachable backend never leaks the key", func(t *testing.T) {
		res := activities.NewSearcher("http://127.0.0.1:1/search?key=sk-secret-key", "sk-secret-key").Search(ctx, "x")
		if !res.IsError || strings.Contains(res.Content, "sk-secret-key") {
			t.Errorf("got %+v", res)
		}
	})
}

func TestWebSearchTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{Searcher: activities.NewSearcher(searchBackend(t, 3, 0, nil), "")})
	res := e.tool(t, "web_search", `{"query":"durable agents"}`)
	if res.IsError || strings.Count(res.Content, "https://example.com/") != 3 {
		t.Errorf("web_search = %+v", res)
	}
	if res := e.tool(t, "web_search", `{"query":""}`); !res.IsError {
		t.Errorf("empty query accepted: %+v", res)
	}
	bare := newEnv(t, activities.Deps{})
	if res := bare.tool(t, "web_search", `{"query":"x"}`); !res.IsError || !strings.Contains(res.Content, "no search backend") {
		t.Errorf("without a backend: %+v", res)
	}
}
