package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleScriptsParse(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*", "*.script.json"))
	if len(files) == 0 {
		t.Fatal("no example scripts found")
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(s.script) == 0 {
			t.Errorf("%s: empty script", f)
		}
	}
}

// answer is the part of a completion the tests look at.
type answer struct {
	status  int
	content string
	args    []string // tool-call arguments
	prompt  int      // usage.prompt_tokens
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// ask posts a chat request with msgs and decodes the answer (streamed when stream is set).
func ask(t *testing.T, url string, stream bool, msgs ...map[string]any) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "fake", "messages": msgs, "stream": stream})
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		return a
	}
	type usage struct {
		PromptTokens int `json:"prompt_tokens"`
	}
	type call struct {
		Function struct {
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if !stream {
		var out struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []call `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		a.content, a.prompt = out.Choices[0].Message.Content, out.Usage.PromptTokens
		for _, c := range out.Choices[0].Message.ToolCalls {
			a.args = append(a.args, c.Function.Arguments)
		}
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []call `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunk.Choices {
			a.content += ch.Delta.Content
			for _, c := range ch.Delta.ToolCalls {
				a.args = append(a.args, c.Function.Arguments)
			}
		}
		if chunk.Usage != nil {
			a.prompt = chunk.Usage.PromptTokens
		}
	}
	return a
}

func TestIndexByAssistantMessages(t *testing.T) {
	url := New(Reply{Content: "one"}, Reply{Content: "two"}).Start(t)
	sys, u1 := msg("system", "Be brief."), msg("user", "hi")
	for _, c := range []struct {
		name string
		msgs []map[string]any
		want string
	}{
		{"first", []map[string]any{sys, u1}, "one"},
		{"retry gets the same reply", []map[string]any{sys, u1}, "one"},
		{"one assistant message", []map[string]any{sys, u1, msg("assistant", "one"), msg("user", "more")}, "two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ask(t, url, false, c.msgs...); got.content != c.want {
				t.Errorf("content = %q, want %q", got.content, c.want)
			}
		})
	}
	if got := ask(t, url, false, sys, u1, msg("assistant", "one"), msg("assistant", "two")); got.status != http.StatusBadRequest {
		t.Errorf("past the script: status %d, want 400", got.status)
	}
}

func TestIndexBySequence(t *testing.T) {
	s := New(Reply{Content: "one"}, Reply{Content: "two"}, Reply{Content: "three"})
	s.Index = BySequence
	url := s.Start(t)
	u1 := msg("user", "hi")
	long := []map[string]any{u1, msg("assistant", "one"), msg("user", "more")}
	// A compacted thread: shorter than the one before, no assistant message at all.
	compacted := []map[string]any{msg("user", "[Summary of the conversation so far, which was compacted: 2 earlier messages]\n\nhi"), msg("user", "more")}
	for _, c := range []struct {
		name string
		msgs []map[string]any
		want string
	}{
		{"first request", []map[string]any{u1}, "one"},
		{"second distinct request", long, "two"},
		{"retry of the first, after another one", []map[string]any{u1}, "one"},
		{"compacted thread takes the next reply", compacted, "three"},
		{"retry of the second", long, "two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ask(t, url, false, c.msgs...); got.content != c.want {
				t.Errorf("content = %q, want %q", got.content, c.want)
			}
		})
	}
	if got := ask(t, url, false, msg("user", "a fourth request")); got.status != http.StatusBadRequest {
		t.Errorf("fourth distinct request: status %d, want 400", got.status)
	}
}

func TestStandingReplies(t *testing.T) {
	s := New(
		Reply{Content: "scripted"},
		Reply{Match: "weather", Content: "sunny"},
		Reply{Match: "You are a poet", Content: "a haiku"},
	)
	url := s.Start(t)
	for _, c := range []struct {
		name string
		msgs []map[string]any
		want string
	}{
		{"matches the last message", []map[string]any{msg("system", "Be brief."), msg("user", "the weather?")}, "sunny"},
		{"matches the system message", []map[string]any{msg("system", "You are a poet."), msg("user", "write")}, "a haiku"},
		{"an earlier message does not match", []map[string]any{msg("user", "the weather?"), msg("user", "thanks")}, "scripted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ask(t, url, false, c.msgs...); got.content != c.want {
				t.Errorf("content = %q, want %q", got.content, c.want)
			}
		})
	}
}

// TestPromptSequences: a thread whose first user message names a task's Prompt gets that
// task's sequence; any other thread the main one; a task's sequence runs out on its own.
func TestPromptSequences(t *testing.T) {
	for _, idx := range []Index{ByAssistantMessages, BySequence} {
		s := New(
			Reply{Content: "main 1"},
			Reply{Prompt: "three", Content: "three 1"},
			Reply{Content: "main 2"},
			Reply{Prompt: "three", Content: "three {n}+1", Repeat: 2},
			Reply{Match: "denied", Content: "ok, not"},
		)
		s.Index = idx
		url := s.Start(t)
		three := msg("user", "write three files")
		for _, c := range []struct {
			msgs []map[string]any
			want string
		}{
			{[]map[string]any{msg("system", "Be brief."), msg("user", "write one")}, "main 1"},
			{[]map[string]any{three}, "three 1"},
			{[]map[string]any{three, msg("assistant", "three 1"), msg("user", "go on")}, "three 1+1"},
			{[]map[string]any{msg("user", "write one"), msg("assistant", "main 1"), msg("user", "three more")}, "main 2"},
			{[]map[string]any{three, msg("assistant", "three 1"), msg("user", "go on"), msg("assistant", "three 1+1"), msg("user", "more")}, "three 2+1"},
			{[]map[string]any{three, msg("user", "denied")}, "ok, not"},
		} {
			if got := ask(t, url, false, c.msgs...); got.content != c.want {
				t.Errorf("index %d, %d messages: content = %q, want %q", idx, len(c.msgs), got.content, c.want)
			}
		}
		long := []map[string]any{three, msg("assistant", "a"), msg("assistant", "b"), msg("assistant", "c"), msg("user", "x")}
		if got := ask(t, url, false, long...); idx == ByAssistantMessages && got.status != http.StatusBadRequest {
			t.Errorf("a fourth reply of the task: status %d, want 400", got.status)
		}
	}
}

func TestCompactionRequests(t *testing.T) {
	const system = CompactPrefix + " between a user, an AI agent and the agent's tools."
	transcript := "user:\nread the files\n\nassistant:\n[calls read_file]"
	t.Run("built-in summary, the sequence untouched", func(t *testing.T) {
		s := New(Reply{Content: "one"}, Reply{Content: "two"})
		s.Index = BySequence
		url := s.Start(t)
		got := ask(t, url, false, msg("system", system), msg("user", transcript))
		if !strings.HasPrefix(got.content, "Summary (fake model)") {
			t.Errorf("summary = %q, want the built-in summary", got.content)
		}
		if got := ask(t, url, false, msg("user", "hi")); got.content != "one" {
			t.Errorf("first agent request after a compaction: %q, want %q", got.content, "one")
		}
		if z := s.Sizes(); len(z) != 2 || !z[0].Compaction || z[1].Compaction {
			t.Errorf("sizes = %+v, want the first marked as a compaction", z)
		}
	})
	t.Run("a scripted summary wins", func(t *testing.T) {
		url := New(Reply{Content: "one"}, Reply{Match: CompactPrefix, Content: "the user wants files read"}).Start(t)
		if got := ask(t, url, false, msg("system", system), msg("user", transcript)); got.content != "the user wants files read" {
			t.Errorf("summary = %q", got.content)
		}
	})
}

func TestRepeat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.script.json")
	script := `[{"tool_calls": [{"name": "read_file", "arguments": {"path": "f{n}.txt"}}], "content": "reading {n}", "repeat": 3},
	            {"content": "done"}]`
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Index = BySequence
	url := s.Start(t)
	for i, want := range []string{`{"path": "f1.txt"}`, `{"path": "f2.txt"}`, `{"path": "f3.txt"}`} {
		got := ask(t, url, false, msg("user", strings.Repeat("x", i+1)))
		if len(got.args) != 1 || got.args[0] != want || got.content != "reading "+string(rune('1'+i)) {
			t.Errorf("repetition %d: args %v content %q, want %s", i+1, got.args, got.content, want)
		}
	}
	if got := ask(t, url, false, msg("user", "xxxx")); got.content != "done" || len(got.args) != 0 {
		t.Errorf("after the repeats: %+v, want done", got)
	}
}

func TestSizesAndUsage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "streamed"}[stream], func(t *testing.T) {
			s := New(Reply{Content: "a reply in words"}, Reply{Content: "again"})
			s.SizesOnly = true
			url := s.Start(t)
			small := ask(t, url, stream, msg("system", strings.Repeat("s", 400)), msg("user", strings.Repeat("u", 4000)))
			ask(t, url, stream, msg("user", "hi"), msg("assistant", "a reply in words"), msg("user", "x"))
			if want := 100 + 1000; small.prompt != want {
				t.Errorf("prompt_tokens = %d, want %d (content bytes / 4)", small.prompt, want)
			}
			z := s.Sizes()
			if len(z) != 2 || z[0].Tokens != 1100 || z[0].Messages != 2 || z[0].Bytes < 4400 {
				t.Errorf("sizes = %+v", z)
			}
			if agent, compaction := s.MaxTokens(); agent != 1100 || compaction != 0 {
				t.Errorf("MaxTokens = %d, %d, want 1100, 0", agent, compaction)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("SizesOnly kept %d requests", n)
			}
		})
	}
}

func TestParseIndex(t *testing.T) {
	for name, want := range map[string]Index{"": ByAssistantMessages, "assistant": ByAssistantMessages, "sequence": BySequence} {
		if got, err := ParseIndex(name); err != nil || got != want {
			t.Errorf("ParseIndex(%q) = %v, %v", name, got, err)
		}
	}
	if _, err := ParseIndex("random"); err == nil {
		t.Error("ParseIndex(random): no error")
	}
}
