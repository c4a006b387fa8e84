package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

type openAPIOperation struct {
	OperationID string                `json:"operationId"`
	Security    []map[string][]string `json:"security"`
}

type openAPIDocument struct {
	OpenAPI    string                                 `json:"openapi"`
	Paths      map[string]map[string]openAPIOperation `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDocument {
	t.Helper()
	s := newServer(t, &fakeRuns{}, Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/openapi.json"})
	var doc openAPIDocument
	if err := json.Unmarshal([]byte(readBody(t, resp)), &doc); err != nil {
		t.Fatalf("decode /v1/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") || len(doc.Paths) == 0 {
		t.Fatalf("openapi %q with %d paths", doc.OpenAPI, len(doc.Paths))
	}
	return doc
}

// TestOpenAPIMatchesRoutes: every operation in the document is a route the server
// handles, with the scope the document lists, and every API route is documented.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	s := newServer(t, &fakeRuns{}, Options{})

	documented := map[string]openAPIOperation{}
	for p, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+p] = op
		}
	}
	routes := map[string]route{}
	for _, rt := range s.routes {
		if isAPI(rt.path) {
			// OpenAPI spells a rest-of-path wildcard as a plain parameter.
			routes[strings.Replace(rt.pattern(), "{path...}", "{path}", 1)] = rt
		}
	}
	for key, op := range documented {
		rt, ok := routes[key]
		if !ok {
			t.Errorf("the document has %s (%s) but no route handles it", key, op.OperationID)
			continue
		}
		// The document's path template must reach this very route through the mux.
		method, p, _ := strings.Cut(key, " ")
		r := httptest.NewRequest(method, strings.NewReplacer("{id}", "r1", "{call_id}", "1.1", "{name}", "a.txt", "{agent}", "assistant", "{instance}", "u42", "{path}", "dir/a.txt").Replace(p), nil)
		if _, pattern := s.mux.Handler(r); pattern != rt.pattern() {
			t.Errorf("%s is served by %q, want %q", key, pattern, rt.pattern())
		}
		var scopes []string
		for _, req := range op.Security {
			scopes = append(scopes, req["bearer"]...)
		}
		want := []string{}
		if rt.scope != "" {
			want = []string{rt.scope}
		}
		if scopes == nil {
			scopes = []string{}
		}
		if !reflect.DeepEqual(scopes, want) {
			t.Errorf("%s: the document's scopes %v, the route needs %v", key, scopes, want)
		}
		if op.OperationID == "" {
			t.Errorf("%s has no operationId", key)
		}
	}
	for key := range routes {
		if _, ok := documented[key]; !ok {
			t.Errorf("route %s is not in /v1/openapi.json", key)
		}
	}
}

// TestOpenAPISchemasMatchTypes keeps the documented shapes in step with the Go types.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for schema, v := range map[string]any{
		"Record": api.Record{}, "Event": api.Event{}, "Artifact": api.Artifact{},
		"Summary":      runs.Summary{},
		"StartRequest": StartBody{}, "ResumeRequest": ResumeBody{}, "DecisionRequest": DecisionBody{},
		"Accepted": Accepted{}, "Created": Created{}, "RunList": RunList{}, "Problem": Problem{},
		"Pending": Pending{}, "StreamStatus": StreamStatus{},
		"PromptRequest": PromptBody{}, "PromptReply": api.PromptReply{}, "SessionList": SessionList{},
		"SessionSummary": runs.SessionSummary{}, "SessionView": api.SessionView{}, "SessionTurn": api.SessionTurn{},
		"ChatMessage": api.ChatMessage{}, "ToolCall": api.ToolCall{}, "Usage": api.Usage{},
		"ApprovalList": ApprovalList{}, "PendingCall": runs.Pending{},
		"PendingActivity": api.PendingActivity{}, "StreamRetrying": StreamRetrying{},
		"Schedule": api.Schedule{}, "ScheduleRun": api.ScheduleRun{}, "ScheduleList": ScheduleList{},
		"ScheduleRequest": ScheduleBody{}, "NoteRequest": NoteBody{},
		"SteerRequest": SteerBody{}, "SteerReply": api.SteerReply{}, "InterruptReply": api.InterruptReply{},
	} {
		want := jsonNames(reflect.TypeOf(v))
		var got []string
		for name := range doc.Components.Schemas[schema].Properties {
			got = append(got, name)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, the Go type has %v", schema, got, want)
		}
	}
}

// jsonNames are the JSON field names of struct type t, with those of embedded structs
// (runs.SessionSummary embeds runs.Summary), each once.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonNames(f.Type)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
