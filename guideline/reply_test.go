package guideline

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/templates"
)

// TestFromReply covers the shapes optimizers wrote: a bare template, one in
// a fence with or without prose around it, a cut reply, and the two echoes
// Qwen2.5-Coder-1.5B-Instruct wrote in make real-quality (temperature 0):
// the template with the prompt's marker and closing instruction after it
// (UT), and the same between marker lines with the instruction twice (CO).
func TestFromReply(t *testing.T) {
	const (
		seed    = "You keep a running summary.\n[Instruction]\n{{ task }}\n[Previous summary]\n{{ prev_summary }}\n{{ history }}"
		m       = templates.OriginalPrompt
		closing = "Output only the improved template text, ready to be rendered."
	)
	tests := []struct {
		name, in, want string
		echoed         bool
	}{
		{"bare", "Summarize {{ history }}\n", "Summarize {{ history }}\n", false},
		{"whole reply fenced", "```jinja\nSummarize {{ history }}\n```", "Summarize {{ history }}\n", false},
		{"prose around the fence", "Here is the updated guideline:\n\n```\nSummarize {{ history }}\n```\n\nIt keeps the facts.", "Summarize {{ history }}\n", false},
		{"cut reply, fence never closed", "Sure:\n```django\nSummarize {{ history }}", "Summarize {{ history }}\n", false},
		{"template on the fence line", "```{{ history }}```", "{{ history }}\n", false},
		{"ut echo: marker and instruction after the template", seed + "\n\n" + m + "\n\n" + closing, seed + "\n", true},
		{"co echo: between markers, instruction twice", m + "\n" + seed + "\n" + m + "\n\n" + closing + "\n" + m + "\n\n" + closing, seed + "\n", true},
		{"echo inside a fence", "```\n" + m + "\n" + seed + "\n" + m + "\n```", seed + "\n", true},
		{"marker with spaces around it", "  " + m + " \n" + seed + "\n" + m, seed + "\n", true},
		{"marker inside a line is text", "Keep " + m + " out.\n", "Keep " + m + " out.\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, echoed := FromReply(tt.in)
			if got != tt.want || echoed != tt.echoed {
				t.Errorf("FromReply(%q) = %q, %v; want %q, %v", tt.in, got, echoed, tt.want, tt.echoed)
			}
			if echoed && strings.Contains(got, m) {
				t.Errorf("a marker survived: %q", got)
			}
		})
	}
}
