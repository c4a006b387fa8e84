package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nexo-temporal/nexo/api"
)

// StoreRecord stores a closing run's final record as a blob (its JSON, named by its
// sha256) and returns the reference the run puts in its memo (api.MemoRecord). The run
// calls it as a local activity, so the record never enters history. The write is
// idempotent: a retried attempt writes the same blob.
func (a *Host) StoreRecord(ctx context.Context, rec api.Record) (api.RecordRef, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return api.RecordRef{}, fmt.Errorf("encode the record of run %s: %w", rec.ID, err)
	}
	sum, err := a.store.PutBlob(ctx, body)
	if err != nil {
		return api.RecordRef{}, fmt.Errorf("store the record of run %s: %w", rec.ID, err)
	}
	return api.RecordRef{SHA256: sum, Size: int64(len(body))}, nil
}
