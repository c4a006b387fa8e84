package gateway

import "testing"

// TestUnknownFieldSuggests: a mistyped top-level key of a request body is answered with
// the field meant, or the fields there are; a key the json error cannot place (nested)
// gets no guess from the wrong level.
func TestUnknownFieldSuggests(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type body struct {
		Workflow string `json:"workflow"`
		Input    any    `json:"input,omitempty"`
		Inner    inner  `json:"inner"`
		Skip     string `json:"-"`
	}
	for _, tc := range []struct{ body, want string }{
		{`{"workflow":"X","imput":{}}`, `unknown field "imput" (did you mean "input"?)`},
		{`{"Workflwo":"X"}`, `unknown field "Workflwo" (did you mean "workflow"?)`},
		{`{"colour":"red"}`, `unknown field "colour" (it takes inner, input, workflow)`},
		{`{"inner":{"nmae":"x"}}`, `unknown field "nmae"`},
	} {
		var v body
		_, err := decodeStrict([]byte(tc.body), &v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("decode %s: %v, want %s", tc.body, err, tc.want)
		}
	}
}
