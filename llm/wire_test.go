package llm

import (
	"fmt"
	"testing"

	"github.com/tidwall/gjson"
)

// TestCheckAgreesWithReaders: a message's checks alone fail exactly where
// reading it does, with the same error, so a reader that only checks
// (serve's short requests) rejects what the full one rejects.
func TestCheckAgreesWithReaders(t *testing.T) {
	openAI := []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"s","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"a"},{"text":"b"}]}`,
		`{"role":"developer"}`,
		`{"role":"robot","content":"x"}`,
		`{"role":3,"content":"x"}`,
		`{"content":"x"}`,
		`{"role":"user","content":3}`,
		`{"role":"user","content":{"text":"x"}}`,
		`{"role":"user","content":true}`,
		`"user"`,
	}
	anthropic := []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"assistant","content":[{"type":"text","text":"I search."},{"type":"tool_use","id":"t1","name":"s","input":{"q":"x"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]},{"type":"text","text":"go on"}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":3}]}`,
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","content":{"x":1}}]}`,
		`{"role":"system","content":"x"}`,
		`{"content":"x"}`,
		`{"role":"user","content":3}`,
		`{"role":"user"}`,
		`["user","hi"]`,
	}
	for _, tc := range []struct {
		format string
		msgs   []string
		read   func(gjson.Result) error
		check  func(gjson.Result) error
	}{
		{"openai", openAI, func(m gjson.Result) error { _, err := OpenAIMessage(m); return err }, CheckOpenAIMessage},
		{"anthropic", anthropic, func(m gjson.Result) error { _, err := AnthropicMessage(m); return err }, CheckAnthropicMessage},
	} {
		failed := 0
		for i, raw := range tc.msgs {
			t.Run(fmt.Sprintf("%s %d", tc.format, i), func(t *testing.T) {
				m := gjson.Parse(raw)
				read, check := tc.read(m), tc.check(m)
				if fmt.Sprint(read) != fmt.Sprint(check) {
					t.Errorf("%s: reading fails with %v, checking with %v", raw, read, check)
				}
				if read != nil {
					failed++
				}
			})
		}
		// Both kinds of message are in the table.
		if failed == 0 || failed == len(tc.msgs) {
			t.Errorf("%s: %d of %d messages fail to read", tc.format, failed, len(tc.msgs))
		}
	}
}
