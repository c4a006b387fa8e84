package platform

import (
	"context"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/nexo-temporal/nexo/api"
)

// attrsClient is a Temporal client whose operator service lists attrs; the rest of the
// client is never called by checkSearchAttribute.
type attrsClient struct {
	client.Client
	attrs map[string]enumspb.IndexedValueType
}

func (c attrsClient) OperatorService() operatorservice.OperatorServiceClient {
	return attrsOperator{attrs: c.attrs}
}

// attrsOperator answers ListSearchAttributes; the embedded nil interface stands for the
// operator methods checkSearchAttribute never calls.
type attrsOperator struct {
	operatorservice.OperatorServiceClient
	attrs map[string]enumspb.IndexedValueType
}

func (o attrsOperator) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: o.attrs}, nil
}

// TestCheckSearchAttribute: the worker refuses a namespace without an attribute it upserts,
// naming the command that creates exactly the missing ones.
func TestCheckSearchAttribute(t *testing.T) {
	kw := enumspb.INDEXED_VALUE_TYPE_KEYWORD
	for _, tc := range []struct {
		name  string
		attrs map[string]enumspb.IndexedValueType
		want  string // "" ok
	}{
		{"all", map[string]enumspb.IndexedValueType{api.SearchAttributeStatus: kw, api.SearchAttributeApprovalAgent: kw, api.SearchAttributeAgent: kw}, ""},
		{"no inbox attribute", map[string]enumspb.IndexedValueType{api.SearchAttributeStatus: kw, api.SearchAttributeAgent: kw},
			"search attribute NexoApprovalAgent is not registered in namespace ns; create it with: temporal operator search-attribute create --namespace ns --name NexoApprovalAgent --type Keyword"},
		{"no agent attribute", map[string]enumspb.IndexedValueType{api.SearchAttributeStatus: kw, api.SearchAttributeApprovalAgent: kw},
			"search attribute NexoAgent is not registered in namespace ns; create it with: temporal operator search-attribute create --namespace ns --name NexoAgent --type Keyword"},
		{"none", nil,
			"search attribute NexoStatus, NexoApprovalAgent, NexoAgent is not registered in namespace ns; create it with: temporal operator search-attribute create --namespace ns --name NexoStatus --type Keyword --name NexoApprovalAgent --type Keyword --name NexoAgent --type Keyword"},
		{"wrong type", map[string]enumspb.IndexedValueType{api.SearchAttributeStatus: kw, api.SearchAttributeApprovalAgent: enumspb.INDEXED_VALUE_TYPE_TEXT},
			"search attribute NexoApprovalAgent in namespace ns has type Text, want Keyword"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSearchAttribute(context.Background(), attrsClient{attrs: tc.attrs}, "ns")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
