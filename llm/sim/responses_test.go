package sim

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// TestResponsesAPI: POST /v1/responses answers the tool call the chat
// endpoint answers for the same conversation, as a function_call item,
// plain and streamed from response.created to response.completed; a plain
// chat gets the fixed reply as an output_text.
func TestResponsesAPI(t *testing.T) {
	h := newHandlerT(t, Config{})
	oa := agentMsgs(taskText, [2]string{"What is the capital of Veloria?", obsVeloria})
	call := oa[2].ToolCalls[0]
	body, _ := json.Marshal(map[string]any{
		"model": "sim-test", "instructions": oa[0].Content,
		"tools": []map[string]any{{"type": "function", "name": "search", "description": "Search the corpus.", "parameters": map[string]any{"type": "object"}}},
		"input": []map[string]any{
			{"role": "user", "content": oa[1].Content},
			{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "Looking up."}}},
			{"type": "function_call", "call_id": call.ID, "name": "search", "arguments": call.Arguments},
			{"type": "function_call_output", "call_id": call.ID, "output": obsVeloria},
			{"type": "compaction", "encrypted_content": "opaque"},
		},
	})
	want := post(t, h, "/v1/chat/completions", chatBody(t, oa, true))
	wantCall := gjson.GetBytes(want.body, "choices.0.message.tool_calls.0.function")

	got := post(t, h, "/v1/responses", body)
	if got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	fc := gjson.GetBytes(got.body, `output.#(type=="function_call")`)
	if gjson.GetBytes(got.body, "object").Str != "response" || gjson.GetBytes(got.body, "status").Str != "completed" ||
		fc.Get("name").Str != wantCall.Get("name").Str || fc.Get("arguments").Str != wantCall.Get("arguments").Str {
		t.Errorf("Responses answer %s; the chat one calls %s", got.body, wantCall.Raw)
	}

	streamed := post(t, h, "/v1/responses", bytes.Replace(body, []byte(`{"input"`), []byte(`{"stream":true,"input"`), 1))
	data, events := sseData(t, streamed.body)
	if len(events) == 0 || events[0] != "response.created" || events[len(events)-1] != "response.completed" || len(events) != len(data) {
		t.Fatalf("events %v", events)
	}
	var args string
	for _, d := range data {
		if gjson.Get(d, "type").Str == "response.function_call_arguments.delta" {
			args += gjson.Get(d, "delta").Str
		}
	}
	// The stream's body differs (stream: true), so its ids do.
	done := gjson.Get(data[len(data)-1], "response")
	if args != fc.Get("arguments").Str || done.Get("output.#.type").Raw != gjson.GetBytes(got.body, "output.#.type").Raw ||
		done.Get("output.0.content.0.text").Str != gjson.GetBytes(got.body, "output.0.content.0.text").Str {
		t.Errorf("streamed arguments %q, want %q; completed %s", args, fc.Get("arguments").Str, data[len(data)-1])
	}

	hello := post(t, h, "/v1/responses", []byte(`{"model":"m","input":"hi"}`))
	if text := gjson.GetBytes(hello.body, `output.0.content.0.text`).Str; text != ChatReply {
		t.Errorf("plain input: %s", hello.body)
	}
	for _, bad := range []string{`{"input":3}`, `{"input":[]}`, `{"input":[{"role":"robot","content":"x"}]}`} {
		if r := post(t, h, "/v1/responses", []byte(bad)); r.status != 400 {
			t.Errorf("%s: status %d, want 400", bad, r.status)
		}
	}
}
