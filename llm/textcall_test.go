package llm

import (
	"encoding/json"
	"net/http"
	"testing"
)

// qwenReply answers like llama.cpp serving Qwen2.5-Coder-1.5B-Instruct with
// its own chat template under tool_choice required: the server's parser
// finds no <tool_call> tags, so the model's text comes back as content.
func qwenReply(content string) fault {
	return func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(map[string]any{
			"choices": []any{map[string]any{"index": 0, "finish_reason": "length",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": map[string]any{"prompt_tokens": 900, "completion_tokens": 96},
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

// Every shape of an agent reply Qwen2.5-Coder-1.5B-Instruct wrote in make
// real, replayed: a call written as text is recovered (the first one
// naming an offered tool), counted and recorded as malformed with its raw
// text; text with no such call stays text, for the agent loop to count as
// no_tool_call.
func TestTextToolCall(t *testing.T) {
	tools := []Tool{
		{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
		{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	tests := []struct {
		name, content, choice string
		wantName, wantArgs    string // "" when no call is recovered
	}{
		{"fenced calls, one per planned step (make real, step 1)",
			"```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"query\": \"Abriis capital\"\n  }\n}\n```\n\n\n```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"query\": \"Adeor ruling house\"\n  }\n}\n```\n\n\n```json",
			ToolChoiceRequired, "search", "{\n    \"query\": \"Abriis capital\"\n  }"},
		{"a search then a finish with made-up answers (make real, step 2)",
			"```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"query\": \"Abriis largest lake\"\n  }\n}\n```\n\n\n```json\n{\n  \"name\": \"finish\",\n  \"arguments\": {\n    \"answers\": [\"Lake Abriis\"]\n  }\n}\n```\n",
			ToolChoiceRequired, "search", "{\n    \"query\": \"Abriis largest lake\"\n  }"},
		{"a bare object, then newlines to max_tokens (make real, later steps)",
			"{\"name\": \"search\", \"arguments\": {\"query\": \"Abriis ruling house\"}}\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
			ToolChoiceRequired, "search", `{"query": "Abriis ruling house"}`},
		{"bare objects one a line, the last cut off by max_tokens (make real)",
			"{\"name\": \"search\", \"arguments\": {\"query\": \"Truzathu\"}}\n{\"name\": \"search\", \"arguments\": {\"query\": \"House Staeran\"}}\n{\"name\": \"search\", \"arguments\": {\"query",
			ToolChoiceRequired, "search", `{"query": "Truzathu"}`},
		{"a finish call with the answers as a list (make real)",
			"{\"name\": \"finish\", \"arguments\": {\"answers\": [\"Truzathu\", \"House Staeran\", \"Drabraeth River\", \"Pogruran\"]}}\n\n\n\n\n\n\n\n\n\n\n\n\n",
			ToolChoiceRequired, "finish", `{"answers": ["Truzathu", "House Staeran", "Drabraeth River", "Pogruran"]}`},
		{"Hermes tags", "<tool_call>\n{\"name\": \"finish\", \"arguments\": {\"answers\": {\"1\": \"Aralic\"}}}\n</tool_call>",
			ToolChoiceRequired, "finish", `{"answers": {"1": "Aralic"}}`},
		{"arguments as a JSON string", `{"name": "search", "arguments": "{\"query\": \"Krothi\"}"}`, "", "search", `{"query": "Krothi"}`},
		{"Llama spelling", `I will search. {"name": "search", "parameters": {"query": "Krothi"}}`, ToolChoiceAuto, "search", `{"query": "Krothi"}`},
		{"nested braces before the call", `{"plan": {"step": 1}} then {"name": "search", "arguments": {"query": "x"}}`, ToolChoiceRequired, "search", `{"query": "x"}`},
		{"the JSON cut off by max_tokens", "```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"query\": \"Abr", ToolChoiceRequired, "", ""},
		{"a finish call cut off by max_tokens (make real: no_tool_call)",
			"{\"name\": \"finish\", \"arguments\": {\"answers\": [\"Aegrath's chief export is the Drabraeth River.\", \"The population of Aeki is unknown.\", \"The founder of Aedobrois is Vokuwi Pegul.\", \"The largest lake of Aeki is Lake Pael",
			ToolChoiceRequired, "", ""},
		{"a tool not offered", `{"name": "browse", "arguments": {"url": "x"}}`, ToolChoiceRequired, "", ""},
		{"arguments not an object", `{"name": "search", "arguments": "Krothi"}`, ToolChoiceRequired, "", ""},
		{"prose answers at the last step (make real: no_tool_call)",
			"- Q1: The capital of Aedobrois is Truzathu.\n- Q2: The twin city of Aedobrois is Aedobro.\n- Q3: The ruling house of Aedobrois is House Staeran.\n- Q4: The longest river of",
			ToolChoiceRequired, "", ""},
		{"tool_choice none keeps text", `{"name": "search", "arguments": {"query": "x"}}`, ToolChoiceNone, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil)
			f.always = qwenReply(tt.content)
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", ToolChoice: tt.choice}, nil)
			var got []MalformedReply
			c.SetMalformedSink(func(m MalformedReply) { got = append(got, m) })
			resp, err := c.Complete(t.Context(), Request{Purpose: PurposeAgent, Messages: userMsg("Q1: What is the capital of Abriis?"), Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantName == "" {
				if len(resp.Message.ToolCalls) != 0 || resp.Message.Content != tt.content || len(got) != 0 || c.Stats().Malformed != 0 {
					t.Errorf("recovered %+v from %q (recorded %+v); want the text left as it is", resp.Message.ToolCalls, tt.content, got)
				}
				return
			}
			if len(resp.Message.ToolCalls) != 1 || resp.Message.Content != "" {
				t.Fatalf("reply %+v, want one call and no text", resp.Message)
			}
			if tc := resp.Message.ToolCalls[0]; tc.Name != tt.wantName || tc.Arguments != tt.wantArgs || tc.ID == "" {
				t.Errorf("call %+v, want %s(%s) with an id", tc, tt.wantName, tt.wantArgs)
			}
			if len(got) != 1 || got[0].Kind != MalformedToolCallInText || got[0].Raw != tt.content || got[0].Purpose != PurposeAgent || c.Stats().Malformed != 1 {
				t.Errorf("recorded %+v, stats %+v; want one tool_call_in_text with the raw reply", got, c.Stats())
			}
		})
	}
}
