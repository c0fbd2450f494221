package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serverError answers status with an OpenAI-format error message.
func serverError(code int, msg string) fault {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":{"message":"` + msg + `","type":"server_error"}}`))
	}
}

// llama.cpp answers 500 when the model's output does not fit the tool-call
// format of its chat template (Gemma 3 270M with tools, tool_choice auto).
// The same request gets the same output, so the client neither retries nor
// fails: it answers an empty reply marked malformed, counted and recorded.
func TestServerCouldNotParse(t *testing.T) {
	tests := []struct {
		name          string
		msg           string
		wantMalformed bool
	}{
		{"llama.cpp peg parser", "The model produced output that does not match the expected peg-native format", true},
		{"older llama.cpp", "Failed to parse tool call arguments as JSON", true},
		{"plain server error", "internal error", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(f *fake) { f.faults = []fault{serverError(500, tt.msg)} })
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", MaxRetries: 3}, nil)
			var mu sync.Mutex
			var got []MalformedReply
			c.SetMalformedSink(func(m MalformedReply) { mu.Lock(); got = append(got, m); mu.Unlock() })
			resp, err := c.Complete(context.Background(), Request{Purpose: PurposeAgent, Messages: userMsg("hi")})
			if err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			if !tt.wantMalformed {
				if f.calls.Load() != 2 || resp.FinishReason == FinishMalformed || st.Malformed != 0 || len(got) != 0 {
					t.Fatalf("a plain 500 must be retried and answered: calls %d, resp %+v, stats %+v", f.calls.Load(), resp, st)
				}
				return
			}
			if f.calls.Load() != 1 {
				t.Errorf("server saw %d calls, want 1 (no retry)", f.calls.Load())
			}
			if resp.FinishReason != FinishMalformed || resp.Message.Content != "" || len(resp.Message.ToolCalls) != 0 || resp.Usage.PromptTokens == 0 {
				t.Errorf("response %+v", resp)
			}
			if st.Malformed != 1 || st.Calls != 1 || st.Failures != 0 {
				t.Errorf("stats %+v", st)
			}
			if len(got) != 1 || got[0].Role != "agent" || got[0].Purpose != PurposeAgent || got[0].Kind != MalformedUnparsed || !strings.Contains(got[0].Raw, tt.msg) {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}

func TestReportMalformedCutsRaw(t *testing.T) {
	c := testClient(t, "compressor", RoleConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, nil)
	var got MalformedReply
	c.SetMalformedSink(func(m MalformedReply) { got = m })
	Report(c, MalformedReply{Kind: MalformedEmptySummary, Raw: strings.Repeat("x", 3*rawLimit)})
	if got.Role != "compressor" || got.Purpose != "compressor" || len(got.Raw) != rawLimit || c.Stats().Malformed != 1 {
		t.Errorf("recorded role %q purpose %q raw %d bytes, stats %+v", got.Role, got.Purpose, len(got.Raw), c.Stats())
	}
	Report(struct{}{}, MalformedReply{Kind: MalformedEmptySummary}) // a completer that does not count is fine
}

// llamaCppTools answers like llama.cpp serving Gemma 3 270M with tools:
// under tool_choice required the output is constrained to a tool call;
// under auto (or none sent) the model writes prose the tool-call parser
// rejects, and the server answers 500 (the reply recorded by make real);
// under none it answers text.
func llamaCppTools(f *fake) fault {
	return func(w http.ResponseWriter, _ *http.Request) {
		var choice string
		_ = json.Unmarshal(f.body(int(f.calls.Load() - 1))["tool_choice"], &choice)
		w.Header().Set("Content-Type", "application/json")
		switch choice {
		case "", ToolChoiceAuto:
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}`))
		case ToolChoiceRequired:
			_, _ = w.Write([]byte(`{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[{"type":"function","id":"t1","function":{"name":"search","arguments":"{\"query\": \"Asto\"}"}}]}}],"usage":{"prompt_tokens":120,"completion_tokens":12}}`))
		default:
			_, _ = w.Write([]byte(`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Asto is a duchy."}}],"usage":{"prompt_tokens":120,"completion_tokens":6}}`))
		}
	}
}

// The agent's tool_choice decides whether llama.cpp can answer at all:
// left to the server (auto) every call was a 500, counted and recorded as
// malformed; required gets a tool call. tool_choice is sent only with
// tools, and is part of the cache key.
func TestToolChoice(t *testing.T) {
	search := []Tool{{Name: "search", Description: "search the documents", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)}}
	tests := []struct {
		choice    string
		tools     []Tool
		sent      string // the tool_choice field as sent, "" when absent
		malformed bool
		toolCall  bool
	}{
		{"", search, "", true, false},
		{ToolChoiceAuto, search, `"auto"`, true, false},
		{ToolChoiceRequired, search, `"required"`, false, true},
		{ToolChoiceNone, search, `"none"`, false, false},
		{ToolChoiceRequired, nil, "", true, false}, // no tools: nothing to require
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s tools %d", cmp.Or(tt.choice, "unset"), len(tt.tools)), func(t *testing.T) {
			f := newFake(t, nil)
			f.always = llamaCppTools(f)
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", ToolChoice: tt.choice}, nil)
			var got []MalformedReply
			c.SetMalformedSink(func(m MalformedReply) { got = append(got, m) })
			resp, err := c.Complete(t.Context(), Request{Purpose: PurposeAgent, Messages: userMsg("Q1: What is the highest peak of Asto?"), Tools: tt.tools})
			if err != nil {
				t.Fatal(err)
			}
			if s := string(f.body(0)["tool_choice"]); s != tt.sent {
				t.Errorf("tool_choice sent %q, want %q", s, tt.sent)
			}
			if (resp.FinishReason == FinishMalformed) != tt.malformed || (c.Stats().Malformed == 1) != tt.malformed || (len(got) == 1) != tt.malformed {
				t.Errorf("malformed: finish %q, stats %+v, recorded %+v; want malformed %v", resp.FinishReason, c.Stats(), got, tt.malformed)
			}
			if tt.malformed && (got[0].Kind != MalformedUnparsed || !strings.Contains(got[0].Raw, "peg-native")) {
				t.Errorf("recorded %+v, want the server's reply", got[0])
			}
			if tt.toolCall != (len(resp.Message.ToolCalls) == 1 && resp.Message.ToolCalls[0].Name == "search") {
				t.Errorf("tool calls %+v, want one: %v", resp.Message.ToolCalls, tt.toolCall)
			}
		})
	}

	t.Run("cache key", func(t *testing.T) {
		f := newFake(t, nil)
		f.always = llamaCppTools(f)
		cache, err := OpenCache(filepath.Join(t.TempDir(), "cache.db"), CacheOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cache.Close() })
		req := Request{Purpose: PurposeAgent, Messages: userMsg("Q1"), Tools: search}
		for _, choice := range []string{ToolChoiceNone, ToolChoiceRequired, ToolChoiceRequired} {
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", ToolChoice: choice}, cache)
			if _, err := c.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.calls.Load(); n != 2 {
			t.Errorf("server saw %d calls, want 2: a reply under none must not answer required", n)
		}
	})
}
