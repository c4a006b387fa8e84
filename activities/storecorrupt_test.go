package activities_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestChangedThreadSegmentIsFinal: a stored thread of two segments whose first (the
// parent, reached while rebuilding the thread) has changed bytes. CompleteChat returns an
// ApplicationError as is, not wrapped (the SDK reads the type and the non-retryable flag
// off the returned error without errors.As, so a wrapped one retries for hours), of type
// NexoStoreCorrupt, leading with the mismatch and naming the segment; the model is not
// called.
func TestChangedThreadSegmentIsFinal(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "never"})
	modelURL := model.Start(t)
	e := newEnv(t, activities.Deps{}) // the worker that stored the thread
	ctx := context.Background()
	put := func(seg api.ThreadSegment) string {
		b, _ := json.Marshal(seg)
		sum, err := e.store.PutBlob(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	root := put(api.ThreadSegment{Messages: userAsks("first")})
	head := put(api.ThreadSegment{Parent: root, Messages: []api.ChatMessage{{Role: api.RoleAssistant, Content: "ok"}}})
	if err := os.WriteFile(filepath.Join(e.dir, "blobs", root), []byte(`{"messages":[{"role":"user","content":"FORGED"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A worker started since (the one that wrote the thread has the blobs in its cache).
	st, err := artifacts.OpenWith(ctx, "file://"+e.dir, artifacts.Options{CacheBytes: artifacts.DefaultCacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	restarted := newEnv(t, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: modelURL, Model: "fake-model"}), Store: st})
	_, err = restarted.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: &api.ThreadRef{Head: head}, Messages: userAsks("next")})
	app, ok := err.(*temporal.ApplicationError)
	if !ok {
		t.Fatalf("CompleteChat = %T %v, want a *temporal.ApplicationError as is", err, err)
	}
	if !app.NonRetryable() || app.Type() != api.ErrTypeStoreCorrupt {
		t.Errorf("error type %s, non-retryable %v; want %s, true", app.Type(), app.NonRetryable(), api.ErrTypeStoreCorrupt)
	}
	if want := "the stored bytes of thread segment " + root[:12] + " do not match their sha256"; !strings.HasPrefix(app.Message(), want) ||
		!strings.Contains(app.Message(), "rebuild thread "+head[:12]) {
		t.Errorf("message = %q, want it to begin %q and say it happened rebuilding thread %s", app.Message(), want, head[:12])
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want none", n)
	}
}
