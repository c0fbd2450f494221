package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestBelowTriggerAgreesWithCounting checks the shortcut that skips token
// counting against counting itself, over bodies that grow across the
// trigger: whenever the shortcut says a conversation cannot pass the
// trigger, its counted tokens do not, and the shortcut is taken for
// bodies well below it (so it does save work).
func TestBelowTriggerAgreesWithCounting(t *testing.T) {
	tok, err := llm.NewTokenizer("")
	if err != nil {
		t.Fatal(err)
	}
	c := &compactor{tok: tok, framing: tok.CountMessage(llm.Message{Role: "tool"})}
	openai := func(msgs ...string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"system","content":"sys"},` + strings.Join(msgs, ",") + `]}`)
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	repeat := func(unit string, n int) string { return strings.Repeat(unit, n) }
	cases := []struct {
		name string
		f    apiFormat
		body func(n int) []byte
		// never: the shortcut must never be taken (the bound does not hold)
		never bool
	}{
		{"ascii words", formatOpenAI, func(n int) []byte {
			return openai(`{"role":"user","content":` + str(repeat("river ", n)) + `}`)
		}, false},
		{"digits and punctuation", formatOpenAI, func(n int) []byte {
			return openai(`{"role":"user","content":` + str(repeat("7;", n)) + `}`)
		}, false},
		{"multi-byte text", formatOpenAI, func(n int) []byte {
			return openai(`{"role":"user","content":` + str(repeat("é漢🙂", n)) + `}`)
		}, false},
		{"escapes", formatOpenAI, func(n int) []byte {
			return openai(`{"role":"user","content":"` + repeat(`\n\"\u00e9\t`, n) + `"}`)
		}, false},
		{"many small messages", formatOpenAI, func(n int) []byte {
			msgs := []string{`{"role":"user","content":"q"}`}
			for i := range n {
				msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"s","arguments":"{}"}}]}`, i),
					fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":"x"}`, i))
			}
			return openai(msgs...)
		}, false},
		{"content parts", formatOpenAI, func(n int) []byte {
			parts := make([]string, n+1)
			for i := range parts {
				parts[i] = `{"type":"text","text":"a"}`
			}
			return openai(`{"role":"user","content":[` + strings.Join(parts, ",") + `]}`)
		}, false},
		{"anthropic tool results", formatAnthropic, func(n int) []byte {
			blocks := make([]string, n+1)
			for i := range blocks {
				blocks[i] = fmt.Sprintf(`{"type":"tool_result","tool_use_id":"t%d","content":"ok"}`, i)
			}
			return []byte(`{"model":"m","system":"sys","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t0","name":"s","input":{"q":"x"}}]},{"role":"user","content":[` + strings.Join(blocks, ",") + `]}]}`)
		}, false},
		// A text given as a number with an exponent is spelled out in full
		// when counted: 1e300 is 301 characters.
		{"number with exponent", formatOpenAI, func(n int) []byte {
			parts := make([]string, n+1)
			for i := range parts {
				parts[i] = `{"type":"text","text":1e300}`
			}
			return openai(`{"role":"user","content":[` + strings.Join(parts, ",") + `]}`)
		}, true},
		// Bytes that are not UTF-8 may count as replacement characters.
		{"invalid UTF-8", formatOpenAI, func(n int) []byte {
			return openai(`{"role":"user","content":"` + repeat("a\xff", n+1) + `"}`)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, trigger := range []int{256, 2048} {
				taken, over := 0, 0
				for n := 0; n <= 2*trigger; n += 1 + n/8 {
					conv, err := parseConversation(tc.f, tc.body(n), nil)
					if err != nil {
						t.Fatalf("n=%d: %v", n, err)
					}
					sp := c.prepareSpan(conv, "tenant", 1, 0)
					counted := sp.headTok + sp.tail(conv.head)
					fast := c.belowTrigger(conv.msgs.Raw, trigger)
					if fast && counted > trigger {
						t.Fatalf("trigger %d, n=%d: the shortcut skips counting but %d tokens pass the trigger", trigger, n, counted)
					}
					if fast {
						taken++
					}
					if counted > trigger {
						over++
					}
				}
				switch {
				case tc.never && taken > 0:
					t.Errorf("trigger %d: the shortcut was taken %d times where its bound does not hold", trigger, taken)
				case tc.never:
				case taken == 0:
					t.Errorf("trigger %d: the shortcut was never taken", trigger)
				case over == 0:
					t.Errorf("trigger %d: no body passed the trigger; the sizes do not cross it", trigger)
				}
			}
		})
	}
}

// TestShortConversationSkipsCounting checks what a request whose history
// is far below the trigger gets: passed on unchanged with the same session
// as when counted, and no token counts in the headers unless a token
// budget needs them.
func TestShortConversationSkipsCounting(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	body := []byte(`{"model":"` + sim.ModelName + `","messages":[{"role":"system","content":"You answer questions."},{"role":"user","content":"Q1: What is the river of Ostrel?"}],"tools":` + string(searchTool) + `}`)
	var sessions []string
	for _, budget := range []int64{0, 1 << 40} {
		cfg := testConfig(t, up.url(), up.url(), dir)
		cfg.Limits.TokenBudget = budget
		_, url := start(t, cfg)
		resp, b := post(t, url+"/v1/chat/completions", body, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("budget %d: status %d: %s", budget, resp.StatusCode, b)
		}
		sent, _ := up.last()
		if string(sent) != string(body) {
			t.Errorf("budget %d: the upstream got a changed body", budget)
		}
		h := resp.Header
		if h.Get(HeaderCompressed) != "false" || h.Get(HeaderTokensSaved) != "0" || h.Get(HeaderSession) == "" {
			t.Errorf("budget %d: headers compressed %q saved %q session %q", budget, h.Get(HeaderCompressed), h.Get(HeaderTokensSaved), h.Get(HeaderSession))
		}
		counted := h.Get(HeaderTokensIn) != ""
		if counted != (budget > 0) {
			t.Errorf("budget %d: tokens counted %v (X-Ctxopt-Tokens-Original %q)", budget, counted, h.Get(HeaderTokensIn))
		}
		sessions = append(sessions, h.Get(HeaderSession))
	}
	if sessions[0] != sessions[1] {
		t.Errorf("session %s without counting, %s with", sessions[0], sessions[1])
	}
}

// TestUncountedParseAgrees parses bodies both ways, checked only (as a
// request too short to count is) and decoded: the same errors, and the
// same messages, head, system prompt, stream flag and session.
func TestUncountedParseAgrees(t *testing.T) {
	always := func(string) bool { return true }
	cases := []struct {
		name string
		f    apiFormat
		body string
		bad  bool
	}{
		{"openai", formatOpenAI, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"developer","content":"d"},{"role":"user","content":"q"},{"role":"assistant","content":"a"}],"stream":true}`, false},
		{"openai without a task", formatOpenAI, `{"messages":[{"role":"assistant","content":"a"},{"role":"user","content":[{"type":"text","text":"q"}]}]}`, false},
		{"repeated fields: the first counts", formatOpenAI, `{"stream":true,"messages":[{"role":"user","content":"q"}],"messages":3,"stream":false}`, false},
		{"anthropic", formatAnthropic, `{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"s","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`, false},
		{"not JSON", formatOpenAI, `{"messages":[`, true},
		{"not an object", formatOpenAI, `[{"role":"user","content":"q"}]`, true},
		{"no messages", formatOpenAI, `{"model":"m"}`, true},
		{"messages not an array", formatOpenAI, `{"messages":{"role":"user"}}`, true},
		{"no message", formatOpenAI, `{"messages":[]}`, true},
		{"bad role", formatOpenAI, `{"messages":[{"role":"user","content":"q"},{"role":"robot","content":"x"}]}`, true},
		{"bad content", formatOpenAI, `{"messages":[{"role":"user","content":"q"},{"role":"tool","content":7}]}`, true},
		{"bad anthropic system", formatAnthropic, `{"system":3,"messages":[{"role":"user","content":"q"}]}`, true},
		{"bad tool result", formatAnthropic, `{"messages":[{"role":"user","content":[{"type":"tool_result","content":{"x":1}}]}]}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			full, ferr := parseConversation(tc.f, []byte(tc.body), nil)
			short, serr := parseConversation(tc.f, []byte(tc.body), always)
			if fmt.Sprint(ferr) != fmt.Sprint(serr) {
				t.Fatalf("decoded: %v; checked only: %v", ferr, serr)
			}
			if tc.bad != (ferr != nil) {
				t.Fatalf("error %v, want one: %v", ferr, tc.bad)
			}
			if tc.bad {
				return
			}
			if full.uncounted || !short.uncounted || short.views != nil || len(full.views) != len(full.raw) {
				t.Errorf("decoded: uncounted %v with %d views; checked: uncounted %v with %d views", full.uncounted, len(full.views), short.uncounted, len(short.views))
			}
			if !slices.Equal(full.raw, short.raw) || full.head != short.head || full.system != short.system || full.stream != short.stream ||
				full.msgs.Raw != short.msgs.Raw || full.msgs.Index != short.msgs.Index || sessionID(full, "k") != sessionID(short, "k") {
				t.Errorf("decoded %+v\nchecked %+v", full, short)
			}
		})
	}
}
