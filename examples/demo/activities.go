package demo

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// Activities are the demo workflows' activities: each exported method is one, named as
// the workflows call it (api.ActivityFetchDocument, api.ActivityPublishDocument,
// api.ActivityFetchMetric). They touch nothing outside the process, so a worker needs no
// config for them. Register them with platform.Activity(demo.Activities{}).
type Activities struct{}

// FetchDocument is DocumentApproval's "fetch" step: it returns the document with the
// given id.
func (Activities) FetchDocument(_ context.Context, docID string) (api.Document, error) {
	if docID == "" {
		return api.Document{}, temporal.NewNonRetryableApplicationError("fetch document: doc_id is empty", api.ErrTypeBadInput, nil)
	}
	return api.Document{ID: docID, Title: "Document " + docID, Body: "The body of document " + docID + "."}, nil
}

// PublishDocument is DocumentApproval's "publish" step: it returns where the document
// went.
func (Activities) PublishDocument(_ context.Context, doc api.Document) (string, error) {
	if doc.ID == "" {
		return "", temporal.NewNonRetryableApplicationError("publish document: document has no id", api.ErrTypeBadInput, nil)
	}
	return "published/" + doc.ID, nil
}

// KnownMetrics are the figures FetchMetric can fetch.
var KnownMetrics = []string{"sales", "signups", "traffic"}

// FetchMetric is BuildDashboard's step: a figure derived from the metric's name. An
// unknown metric is a non-retryable error naming the known ones.
func (Activities) FetchMetric(_ context.Context, name string) (api.Metric, error) {
	if !slices.Contains(KnownMetrics, name) {
		return api.Metric{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("fetch metric: unknown metric %.80q (known: %v)", name, KnownMetrics), api.ErrTypeNotFound, nil)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return api.Metric{Name: name, Value: float64(h.Sum32() % 10000)}, nil
}
