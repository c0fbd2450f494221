package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// anthropicConversation is an Anthropic request body of a tool-using
// conversation with steps turns, then the extra messages.
func anthropicConversation(steps int, extra ...map[string]any) []byte {
	msgs := []map[string]any{{"role": "user", "content": "Answer: Q1: What is the river of Ostrel?"}}
	for i := range steps {
		id := "toolu_" + strconv.Itoa(i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []map[string]any{
				{"type": "text", "text": "searching"},
				{"type": "tool_use", "id": id, "name": "search", "input": map[string]string{"query": "river " + strconv.Itoa(i)}},
			}},
			map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": observation(i)}}},
		)
	}
	msgs = append(msgs, extra...)
	body, _ := json.Marshal(map[string]any{"model": sim.ModelName, "max_tokens": 256, "system": "You answer questions by searching.", "messages": msgs,
		"tools": []map[string]any{{"name": "search", "description": "search", "input_schema": map[string]any{"type": "object"}}}})
	return body
}

var anthropicHeader = map[string]string{"anthropic-version": "2023-06-01"}

// TestCountTokens: count_tokens answers the tokens of the body the
// upstream receives for the same messages: as sent when short, and the
// compressed body once the session has a summary, well under the
// uncompressed count.
func TestCountTokens(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	srv, url := start(t, testConfig(t, up.url(), up.url(), dir))
	count := func(body []byte) (int, http.Header) {
		t.Helper()
		resp, b := post(t, url+"/v1/messages/count_tokens", body, anthropicHeader)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("count_tokens: %d %s", resp.StatusCode, b)
		}
		return int(gjson.GetBytes(b, "input_tokens").Int()), resp.Header
	}
	// What the upstream received, counted as count_tokens counts.
	received := func() int {
		t.Helper()
		b, _ := up.last()
		conv, err := parseConversation(formatAnthropic, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return srv.inputTokens(conv, gjson.GetBytes(b, "tools").Raw)
	}
	for _, c := range []struct {
		name       string
		steps      int
		compressed bool
	}{{"short", 1, false}, {"long", 6, true}} {
		t.Run(c.name, func(t *testing.T) {
			body := anthropicConversation(c.steps)
			if resp, b := post(t, url+"/v1/messages", body, anthropicHeader); resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != strconv.FormatBool(c.compressed) {
				t.Fatalf("messages: %d compressed %s: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
			}
			n, h := count(body)
			original, _ := strconv.Atoi(h.Get(HeaderTokensIn))
			if _, b := post(t, url+"/v1/messages", body, anthropicHeader); !gjson.ParseBytes(b).IsObject() {
				t.Fatalf("messages: %s", b)
			}
			if got := received(); n != got {
				t.Errorf("count_tokens %d, the upstream received %d tokens", n, got)
			}
			if c.compressed != (n < original) || h.Get(HeaderCompressed) != strconv.FormatBool(c.compressed) {
				t.Errorf("count_tokens %d of %d uncompressed, compressed header %s", n, original, h.Get(HeaderCompressed))
			}
			t.Logf("%s: count_tokens %d, uncompressed %d", c.name, n, original)
		})
	}
}

const compactPrompt = "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests."

// TestCompactionRequest: with the detector on, an agent's compaction
// request of a session with a summary is answered from it, in the
// request's API and framing (streamed or not), with no upstream call;
// off, or with no summary yet, or with a message that does not match, it
// is forwarded.
func TestCompactionRequest(t *testing.T) {
	ask := map[string]any{"role": "user", "content": compactPrompt}
	for _, c := range []struct {
		name     string
		on       bool
		warm     bool // a long request first, so the session has a summary
		last     map[string]any
		stream   bool
		answered bool
		api      apiFormat
	}{
		{"on", true, true, ask, false, true, formatAnthropic},
		{"on, streamed", true, true, ask, true, true, formatAnthropic},
		{"on, pattern", true, true, map[string]any{"role": "user", "content": "Please COMPACT-NOW the chat"}, false, true, formatAnthropic},
		{"off", false, true, ask, false, false, formatAnthropic},
		{"on, no summary yet", true, false, ask, false, false, formatAnthropic},
		{"on, other message", true, true, map[string]any{"role": "user", "content": "go on"}, false, false, formatAnthropic},
		{"on, chat completions", true, true, ask, false, true, formatOpenAI},
		{"on, chat completions streamed", true, true, ask, true, true, formatOpenAI},
		{"on, responses", true, true, ask, false, true, formatResponses},
		{"on, responses streamed", true, true, ask, true, true, formatResponses},
		{"off, responses", false, true, ask, false, false, formatResponses},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newRecUpstream(t, sim.Config{})
			dir, promoted, _ := registry(t)
			cfg := testConfig(t, up.url(), up.url(), dir)
			cfg.AgentCompaction.Enabled = c.on
			cfg.AgentCompaction.Patterns = []string{`(?i)\bcompact-now\b`}
			_, url := start(t, cfg)
			path, hdr := "/v1/chat/completions", map[string]string(nil)
			body := func(extra ...map[string]any) []byte {
				b := toolConversation(6, "c")
				var msgs []map[string]any
				_ = json.Unmarshal([]byte(gjson.GetBytes(b, "messages").Raw), &msgs)
				out, _ := json.Marshal(map[string]any{"model": sim.ModelName, "messages": append(msgs, extra...), "stream": c.stream && len(extra) > 0})
				return out
			}
			switch c.api {
			case formatAnthropic:
				path, hdr = "/v1/messages", anthropicHeader
				body = func(extra ...map[string]any) []byte {
					return bytes.Replace(anthropicConversation(6, extra...), []byte(`{"max_tokens"`), []byte(`{"stream":`+strconv.FormatBool(c.stream && len(extra) > 0)+`,"max_tokens"`), 1)
				}
			case formatResponses:
				path = "/v1/responses"
				body = func(extra ...map[string]any) []byte {
					b := responsesConversation(3, "c")
					var input []map[string]any
					_ = json.Unmarshal([]byte(gjson.GetBytes(b, "input").Raw), &input)
					out, _ := json.Marshal(map[string]any{"model": sim.ModelName, "input": append(input, extra...), "stream": c.stream && len(extra) > 0})
					return out
				}
			}
			if c.warm {
				if resp, b := post(t, url+path, body(), hdr); resp.Header.Get(HeaderCompressed) != "true" {
					t.Fatalf("warm-up not compressed: %s", b)
				}
			}
			up.mu.Lock()
			before := len(up.bodies)
			up.mu.Unlock()
			resp, b := post(t, url+path, body(c.last), hdr)
			up.mu.Lock()
			calls := len(up.bodies) - before
			up.mu.Unlock()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			answered := resp.Header.Get(HeaderCompaction) == "summary"
			if answered != c.answered || calls != map[bool]int{true: 0, false: 1}[c.answered] {
				t.Fatalf("answered %v with %d upstream calls, want %v", answered, calls, c.answered)
			}
			if !c.answered {
				return
			}
			text := answerText(t, c.api, c.stream, b)
			if !strings.HasPrefix(text, "Summary of this conversation so far") || !strings.Contains(text, "The most recent turns, verbatim:") ||
				!strings.Contains(text, "action: search(") || resp.Header.Get(HeaderGuideline) != promoted {
				t.Errorf("answer %q, guideline %q", text, resp.Header.Get(HeaderGuideline))
			}
			if got := metric(t, url, "ctxopt_serve_compaction_answered_total"); got != 1 {
				t.Errorf("compaction_answered_total %v", got)
			}
		})
	}
}

// answerText is the text of an answer, whole or streamed, in api.
func answerText(t *testing.T, api apiFormat, stream bool, b []byte) string {
	t.Helper()
	if !stream {
		return gjson.GetBytes(b, map[apiFormat]string{formatAnthropic: "content.0.text", formatOpenAI: "choices.0.message.content",
			formatResponses: "output.0.content.0.text"}[api]).Str
	}
	var text strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		if gjson.Get(d, "type").Str == "response.output_text.delta" {
			text.WriteString(gjson.Get(d, "delta").Str)
		}
		text.WriteString(gjson.Get(d, "delta.text").Str + gjson.Get(d, "choices.0.delta.content").Str)
	}
	return text.String()
}

// TestAgentCompactionConfig: patterns must compile, phrases be non-empty,
// and an enabled detector match something.
func TestAgentCompactionConfig(t *testing.T) {
	for _, c := range []struct {
		a    AgentCompaction
		want string
	}{
		{AgentCompaction{Enabled: true, Patterns: []string{"("}}, "agent_compaction.patterns[0]: is not a regular expression"},
		{AgentCompaction{Phrases: []string{" "}}, "agent_compaction.phrases[0]: is empty"},
		{AgentCompaction{Enabled: true}, "agent_compaction: enabled with no phrases"},
	} {
		cfg := testConfig(t, "http://127.0.0.1:1/v1", "", t.TempDir())
		cfg.Compressor.Teacher = Link{Timeout: time.Second}
		cfg.AgentCompaction = c.a
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.want)
		}
	}
	d := newCompactionDetector(AgentCompaction{Enabled: true, Phrases: DefaultCompactionPhrases})
	for text, want := range map[string]bool{
		compactPrompt: true,
		"You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary.": true,
		"Summarize the sky": false,
	} {
		if d.match(text) != want {
			t.Errorf("match(%q) = %v", text, !want)
		}
	}
	if newCompactionDetector(Default().AgentCompaction) != nil {
		t.Error("the detector is on by default")
	}
}
