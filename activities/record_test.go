package activities

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

func TestStoreRecordWritesTheRecordAsABlob(t *testing.T) {
	t.Parallel()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := New(Deps{Store: st})
	rec := api.Record{ID: "r1", Workflow: "DocumentApproval", Status: api.StatusDone,
		State:  map[string]json.RawMessage{"fetch": json.RawMessage(`{"id":"42"}`)},
		Events: []api.Event{{Seq: 1, Type: "done", Data: json.RawMessage("null")}}}
	ref, err := a.Host.StoreRecord(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	body, err := st.GetBlob(context.Background(), ref.SHA256)
	if err != nil {
		t.Fatalf("the reference names no blob: %v", err)
	}
	var got api.Record
	if err := json.Unmarshal(body, &got); err != nil || int64(len(body)) != ref.Size {
		t.Fatalf("blob of %d bytes (ref says %d): %v", len(body), ref.Size, err)
	}
	if got.ID != "r1" || string(got.State["fetch"]) != `{"id":"42"}` || len(got.Events) != 1 {
		t.Errorf("stored record = %+v", got)
	}
	again, err := a.Host.StoreRecord(context.Background(), rec)
	if err != nil || again != ref {
		t.Errorf("a retried attempt stored %+v (%v), want the same %+v", again, err, ref)
	}
}
