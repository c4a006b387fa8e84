package main

import "strings"

// planLine renders a plan update's steps on one line: "[x] done · [>] in progress · [ ]
// pending".
func planLine(steps any) string {
	list, _ := steps.([]any)
	parts := make([]string, 0, len(list))
	for _, s := range list {
		m, _ := s.(map[string]any)
		step, _ := m["step"].(string)
		mark := "[ ]"
		switch m["status"] {
		case "done":
			mark = "[x]"
		case "in_progress":
			mark = "[>]"
		}
		parts = append(parts, mark+" "+step)
	}
	return strings.Join(parts, " · ")
}
