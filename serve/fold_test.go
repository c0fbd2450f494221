package serve

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

func TestFoldOutputs(t *testing.T) {
	note, err := foldedNote()
	if err != nil || note == "" {
		t.Fatalf("note %q: %v", note, err)
	}
	for _, tc := range []struct {
		name   string
		f      apiFormat
		raw    string
		checks map[string]string // gjson path -> want
	}{
		{"openai tool", formatOpenAI, `{"role":"tool","tool_call_id":"c1","content":"long output"}`,
			map[string]string{"role": "tool", "tool_call_id": "c1", "content": note}},
		{"openai tool with parts", formatOpenAI, `{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"long"}]}`,
			map[string]string{"tool_call_id": "c1", "content": note}},
		{"openai call untouched", formatOpenAI, `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{}"}}]}`,
			map[string]string{"tool_calls.0.id": "c1", "content": ""}},
		{"anthropic results", formatAnthropic, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"long"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"long"}],"is_error":true},{"type":"text","text":"go on"}]}`,
			map[string]string{"role": "user", "content.0.tool_use_id": "t1", "content.0.content": note, "content.1.content": note, "content.1.is_error": "true", "content.2.text": "go on"}},
		{"anthropic result without content", formatAnthropic, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}`,
			map[string]string{"content.0.tool_use_id": "t1", "content.0.content": note}},
		{"anthropic text untouched", formatAnthropic, `{"role":"user","content":"plain"}`,
			map[string]string{"content": "plain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := foldOutputs(tc.f, tc.raw, note)
			if err != nil {
				t.Fatal(err)
			}
			if !gjson.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			for path, want := range tc.checks {
				if v := gjson.Get(got, path).String(); v != want {
					t.Errorf("%s = %q, want %q (%s)", path, v, want, got)
				}
			}
		})
	}
}

// foldSpan is a compactor and the span of a tool conversation of steps
// turns (OpenAI format) for layout tests.
func foldSpan(t testing.TB, steps int, cfg Compression) (*compactor, *span) {
	t.Helper()
	tok, err := llm.NewTokenizer(llm.DefaultEncoding)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := parseConversation(formatOpenAI, toolConversation(steps, "fold"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &compactor{cfg: cfg, tok: tok}
	return c, c.prepareSpan(conv, "", cfg.KeepLast, cfg.KeepTokens)
}

func TestLayout(t *testing.T) {
	note, _ := foldedNote()
	c0, sp := foldSpan(t, 8, Compression{KeepLast: 1})
	head := sp.conv.head
	turn := sp.tail(sp.cuts[7])                                                                                          // one turn verbatim
	folded := sp.tok[head+12] + c0.foldedTok(sp, head+13, c0.tok.CountMessage(llm.Message{Role: "tool", Content: note})) // a turn folded
	all := sp.headTok + sp.tail(head)
	for _, tc := range []struct {
		name                   string
		threshold, keepTokens  int
		wantDrop, wantVerbatim int // in turns from the first
	}{
		{"fits: as sent", all, -1, 0, 0},
		{"keep_tokens 0: 3/8 of the threshold verbatim", 8 * turn, 0, 0, 5},
		{"keep_tokens: the newest turns within it verbatim", 1 << 20, 3 * turn, 0, 5},
		{"keep_tokens below a turn: the last turn still", 1 << 20, 10, 0, 7},
		{"over the threshold: older outputs folded as needed", all - 1, -1, 0, 1},
		{"folding is not enough: oldest turns left out", sp.headTok + turn + 3*folded, -1, 4, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &compactor{cfg: Compression{Threshold: tc.threshold, KeepTokens: tc.keepTokens}, tok: c0.tok}
			f := c.layout(sp, head, sp.headTok, note)
			if f.drop != sp.cuts[tc.wantDrop] || f.verbatim != sp.cuts[tc.wantVerbatim] {
				t.Fatalf("drop %d verbatim %d, want %d and %d", f.drop, f.verbatim, sp.cuts[tc.wantDrop], sp.cuts[tc.wantVerbatim])
			}
			body, err := f.body(sp.conv, "", note)
			if err != nil {
				t.Fatal(err)
			}
			checkPairs(t, body)
			conv, err := parseConversation(formatOpenAI, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, v := range conv.views {
				for _, m := range v {
					n += c.tok.CountMessage(m)
				}
			}
			if sys := c.tok.CountMessage(conv.views[0][0]); n-sys != f.tokens {
				t.Errorf("layout says %d tokens, the body has %d", f.tokens, n-sys)
			}
			if f.tokens > tc.threshold {
				t.Errorf("%d tokens sent, over the %d threshold", f.tokens, tc.threshold)
			}
			last := gjson.GetBytes(body, "messages.@reverse.0.content").Str
			if last != observation(7) {
				t.Errorf("the last tool result is not verbatim: %.60q", last)
			}
		})
	}
}

// TestKeepTokensFolds drives a conversation through serve with keep_tokens
// set: past the threshold, the turns after the summary go verbatim within
// keep_tokens (the last always), older outputs folded, every pair whole.
// The teacher answers after the conversation has ended, so every compacted
// request goes folded, with no summary, whatever the machine's speed.
func TestKeepTokensFolds(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	teacher := newRecUpstream(t, sim.Config{Latency: 2 * time.Second})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), teacher.url(), dir)
	cfg.Compression.KeepTokens = 250
	_, url := start(t, cfg)
	note, _ := foldedNote()
	tok, _ := llm.NewTokenizer(llm.DefaultEncoding)
	steps := 14
	for n := 1; n <= steps; n++ {
		if resp, b := post(t, url+"/v1/chat/completions", toolConversation(n, "kt"), nil); resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", n, resp.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond) // the agent's tool time
	}
	body, _ := up.last()
	checkPairs(t, body)
	msgs := gjson.GetBytes(body, "messages").Array()
	verbatim, folded, firstVerbatim := 0, 0, 0
	for i, m := range msgs {
		if m.Get("role").Str != "tool" {
			continue
		}
		idx, _ := strconv.Atoi(strings.TrimPrefix(m.Get("tool_call_id").Str, "call_kt_"))
		switch m.Get("content").Str {
		case note:
			if verbatim > 0 {
				t.Errorf("message %d: an output folded after a verbatim one", i)
			}
			folded++
		case observation(idx):
			if verbatim == 0 {
				firstVerbatim = i - 1 // its call
			}
			verbatim++
		default:
			t.Errorf("message %d: tool content is neither its output nor the note: %.60q", i, m.Get("content").Str)
		}
	}
	if last := msgs[len(msgs)-1]; last.Get("content").Str != observation(steps-1) {
		t.Errorf("the last tool result is not verbatim: %.60q", last.Get("content").Str)
	}
	if folded == 0 || verbatim == 0 {
		t.Errorf("%d outputs folded, %d verbatim; want both", folded, verbatim)
	}
	conv, err := parseConversation(formatOpenAI, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	tail := 0
	for _, m := range conv.flat(firstVerbatim, len(conv.raw)) {
		tail += tok.CountMessage(m)
	}
	if verbatim > 1 && tail > cfg.Compression.KeepTokens {
		t.Errorf("%d verbatim outputs of %d tokens, over keep_tokens %d", verbatim, tail, cfg.Compression.KeepTokens)
	}
	if bytes.Contains(body, []byte("HISTORY_SUMMARY")) {
		t.Error("the last request carries a summary the teacher cannot have made yet")
	}
}

// BenchmarkLayout is the work folding adds to a compacted request of 60
// turns: the layout and the folded body (go test -bench Layout).
func BenchmarkLayout(b *testing.B) {
	note, _ := foldedNote()
	c, sp := foldSpan(b, 60, Compression{KeepLast: 1, KeepTokens: 2000, Threshold: 8000})
	b.ReportAllocs()
	for b.Loop() {
		f := c.layout(sp, sp.conv.head, sp.headTok, note)
		if _, err := f.body(sp.conv, "a summary", note); err != nil {
			b.Fatal(err)
		}
	}
}
