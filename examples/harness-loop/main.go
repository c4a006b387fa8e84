// Command harness-loop is a small offline agent harness for Nexo's pluggable loop
// (docs/harness-protocol.md): the agent `harnessed` of nexo.yaml beside it runs its turns
// through this program instead of a model. It reads the start message on stdin and
// answers on stdout with JSON lines. Asked to "write WORD to FILE", it asks for
// write_file with that path and content; once the transcript holds the tool's result, it
// answers with a final text. Like every harness it is stateless: each step starts it
// afresh with the whole transcript, and it decides from that alone.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

type start struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Prompt   string `json:"prompt"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Transcript []struct {
		Role    string `json:"role"`
		Text    string `json:"text"`
		IsError bool   `json:"is_error"`
	} `json:"transcript"`
}

var writeAsk = regexp.MustCompile(`(?i)write\s+(\S+)\s+to\s+(\S+)`)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "harness-loop:", err)
		os.Exit(1)
	}
}

func run() error {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return fmt.Errorf("read the start message: %w", err)
	}
	var s start
	if err := json.Unmarshal(line, &s); err != nil {
		return fmt.Errorf("the start message is not JSON: %w", err)
	}
	if s.Type != "start" || s.Protocol != 1 {
		return fmt.Errorf("want a start message of protocol 1, got type %q protocol %d", s.Type, s.Protocol)
	}
	out := json.NewEncoder(os.Stdout)
	say := func(v map[string]any) {
		if err == nil {
			err = out.Encode(v)
		}
	}
	// The last entry tells where the turn is: a tool's result means the write was tried.
	if n := len(s.Transcript); n > 0 && s.Transcript[n-1].Role == "tool" {
		last := s.Transcript[n-1]
		say(map[string]any{"type": "usage", "prompt_tokens": len(line) / 4, "completion_tokens": 8})
		if last.IsError {
			say(map[string]any{"type": "final", "text": "I could not write the file: " + last.Text})
		} else {
			say(map[string]any{"type": "final", "text": "Done: the file is written."})
		}
		return err
	}
	m := writeAsk.FindStringSubmatch(s.Prompt)
	if m == nil {
		say(map[string]any{"type": "final", "text": `I only write files: ask me to "write WORD to FILE".`})
		return err
	}
	offered := false
	for _, t := range s.Tools {
		offered = offered || t.Name == "write_file"
	}
	if !offered {
		say(map[string]any{"type": "final", "text": "I was not offered write_file, so I cannot write " + m[2] + "."})
		return err
	}
	word, file := m[1], m[2]
	say(map[string]any{"type": "thinking", "text": "The user wants " + file + " to hold " + word + "."})
	say(map[string]any{"type": "plan", "steps": []map[string]string{
		{"step": "write " + file, "status": "in_progress"}, {"step": "report back", "status": "pending"}}})
	say(map[string]any{"type": "text", "text": "I will write " + word + " to " + file + "."})
	say(map[string]any{"type": "usage", "prompt_tokens": len(line) / 4, "completion_tokens": 16})
	say(map[string]any{"type": "tool_use", "id": "w1", "name": "write_file",
		"arguments": map[string]string{"path": file, "content": word}})
	return err
}
