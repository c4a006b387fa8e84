package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// withTexts returns rec with the reply texts it holds by reference put back whole: its
// events' (artifacts.ResolveTexts) and an agent run's result's content. Every record the
// Client hands out passes here, so `show`, `logs`, the watches, the HTTP API and its SSE
// streams all carry the whole text while history holds the blob's name. rec itself is
// never changed.
func (c *Client) withTexts(ctx context.Context, rec api.Record) (api.Record, error) {
	var st artifacts.BlobGetter
	if c.Blobs != nil {
		st = c.Blobs
	}
	events, err := artifacts.ResolveTexts(ctx, st, rec.Events)
	if err != nil {
		return rec, fmt.Errorf("run %s: %w", rec.ID, err)
	}
	rec.Events = events
	if rec.Workflow == api.WorkflowAgentRun && len(rec.Result) > 0 && rec.Result[0] == '{' {
		result, err := resolveResult(ctx, st, rec.Result)
		if err != nil {
			return rec, fmt.Errorf("run %s: result: %w", rec.ID, err)
		}
		rec.Result = result
	}
	return rec, nil
}

// resolveResult puts the whole answer back in an agent run's result (api.AgentResult)
// whose content was stored by reference.
func resolveResult(ctx context.Context, st artifacts.BlobGetter, raw json.RawMessage) (json.RawMessage, error) {
	var res map[string]any
	if json.Unmarshal(raw, &res) != nil {
		return raw, nil
	}
	ref, _ := res["content_ref"].(string)
	if ref == "" {
		return raw, nil
	}
	text, err := storedText(ctx, st, ref)
	if err != nil {
		return raw, err
	}
	res["content"] = text
	delete(res, "content_ref")
	delete(res, "content_bytes")
	return json.Marshal(res)
}

// storedText reads the reply text stored as blob ref.
func storedText(ctx context.Context, st artifacts.BlobGetter, ref string) (string, error) {
	if !artifacts.ValidSum(ref) {
		return "", fmt.Errorf("reply text reference %q is not a blob name", ref)
	}
	if st == nil {
		return "", fmt.Errorf("read the reply text stored as blob %s: no blob store to read it from (set artifacts.url)", ref)
	}
	b, err := st.GetBlob(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("read the reply text stored as blob %s: %w (every worker, the starter and the gateway must share one artifacts.url)", ref, err)
	}
	return string(b), nil
}
