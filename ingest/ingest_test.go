package ingest

import (
	"strings"
	"testing"
)

func TestParseCall(t *testing.T) {
	const msgs = `"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hello"}]}]`
	const reply = `"choices":[{"message":{"role":"assistant","content":"ok"}}]`
	tests := []struct {
		name, line string
		purpose    string // want, when no error
		session    string
		err        string
	}{
		{"flat compressor", `{` + msgs + `,` + reply + `,"session_id":"x"}`, "compressor", "x", ""},
		{"tools make an agent", `{` + msgs + `,"tools":[{"type":"function"}],` + reply + `}`, "agent", "s-", ""},
		{"purpose wins", `{` + msgs + `,"tools":[{}],` + reply + `,"metadata":{"purpose":"summarizer"}}`, "compressor", "s-", ""},
		{"not JSON", `{"messages":`, "", "", "not valid JSON"},
		{"no messages", `{` + reply + `}`, "", "", "no message list"},
		{"no reply", `{` + msgs + `}`, "", "", "no reply message"},
		{"bad role", `{"messages":[{"role":"robot","content":"x"}],` + reply + `}`, "", "", `unknown role "robot"`},
		{"bad purpose", `{` + msgs + `,` + reply + `,"purpose":"judge"}`, "", "", `purpose "judge"`},
		{"bad kind", `{` + msgs + `,` + reply + `,"metadata":{"kind":"plan"}}`, "", "", `kind "plan"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseCall([]byte(tt.line), openAIChat)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.purpose != tt.purpose || !strings.HasPrefix(c.session, tt.session) || c.messages[1].Content != "hello" || c.output.Content != "ok" {
				t.Errorf("got purpose %q session %q messages %+v output %+v", c.purpose, c.session, c.messages, c.output)
			}
		})
	}
}
