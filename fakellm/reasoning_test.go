package fakellm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A scripted reply's reasoning goes out under the field it names, whole in a reply and
// word by word before the content in a stream.
func TestReasoningReplies(t *testing.T) {
	for _, field := range []string{"", FieldReasoning} {
		url := New(Reply{Content: "hi", Reasoning: "one two", ReasoningField: field}).Start(t)
		want := field
		if want == "" {
			want = FieldReasoningContent
		}
		post := func(stream bool) string {
			body, _ := json.Marshal(map[string]any{"model": "m", "stream": stream, "messages": []map[string]any{{"role": "user", "content": "x"}}})
			resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		var reply struct {
			Choices []struct{ Message map[string]any } `json:"choices"`
		}
		if err := json.Unmarshal([]byte(post(false)), &reply); err != nil || len(reply.Choices) != 1 || reply.Choices[0].Message[want] != "one two" {
			t.Errorf("field %q: reply %+v (%v), want %s: one two", field, reply, err, want)
		}
		s := post(true)
		first, second, content := strings.Index(s, `"`+want+`":"one "`), strings.Index(s, `"`+want+`":"two"`), strings.Index(s, `"content":"hi"`)
		if first < 0 || second < first || content < second {
			t.Errorf("field %q: stream does not send the reasoning word by word before the content:\n%s", field, s)
		}
	}
}
