package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
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
		{"content an object", `{"messages":[{"role":"user","content":{"a":{"b":1}}}],` + reply + `}`, "", "", `message 0: content is an object; want a string or a list of content parts`},
		{"content a number", `{"messages":[{"role":"user","content":5}],` + reply + `}`, "", "", `content is a number`},
		{"part text not a string", `{"messages":[{"role":"user","content":[{"type":"text","text":["x"]}]}],` + reply + `}`, "", "", `content[0].text is a list; want a string`},
		{"part not an object", `{"messages":[{"role":"user","content":["x"]}],` + reply + `}`, "", "", `content[0] is a string; want a content part object`},
		{"reply content an object", `{` + msgs + `,"choices":[{"message":{"role":"assistant","content":{}}}]}`, "", "", `reply: content is an object`},
		{"too many messages", `{"messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, DefaultMaxMessages) + `{"role":"user","content":"x"}],` + reply + `}`, "", "", `more than 10000 messages at "request.messages|messages", the limit of messages in one call; raise --max-messages`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseCall([]byte(tt.line), openAIChat, DefaultMaxMessages)
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

// TestCtxoptTornLastRecord imports a serve session log that a crash cut
// short (its torn last line is left out) and one damaged in the middle
// (an error naming the line, nothing written).
func TestCtxoptTornLastRecord(t *testing.T) {
	var recs []string
	for _, id := range []string{"a", "b", "c"} {
		b, err := rollout.EncodeTrajectory(&rollout.Trajectory{TaskID: id, Success: true})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, string(b))
	}
	tests := []struct {
		name, log string
		sessions  int
		wantErr   string
	}{
		{"torn last line", recs[0] + "\n" + recs[1] + "\n" + recs[2][:20], 2, ""},
		{"damaged line in the middle", recs[0] + "\n" + recs[1][:20] + "\n" + recs[2] + "\n", 0, "log.jsonl:2: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "log.jsonl"), filepath.Join(dir, "out")
			if err := os.WriteFile(in, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Import(t.Context(), Options{Format: FormatCtxopt, In: in, Out: out})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("a failed import left %s", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Sessions != tc.sessions || rep.Lines != tc.sessions {
				t.Errorf("imported %d sessions from %d lines, want %d of each", rep.Sessions, rep.Lines, tc.sessions)
			}
		})
	}
}
