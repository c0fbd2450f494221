package serve

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// writeAnswer answers conv's request with text as its API would, with no
// upstream call: a whole response, or the API's events when the request
// streams. id names the request (its X-Request-Id); out is text's tokens.
func writeAnswer(w http.ResponseWriter, conv *conversation, id, text string, out int) {
	model := gjson.GetBytes(conv.body, "model").Str
	switch conv.format {
	case formatAnthropic:
		writeAnthropicAnswer(w, conv.stream, "msg_ctxopt_"+id, model, text, out)
	case formatResponses:
		writeResponsesAnswer(w, conv.stream, "resp_ctxopt_"+id, model, text, out)
	default:
		writeChatAnswer(w, conv, "chatcmpl-ctxopt-"+id, model, text, out)
	}
}

// writeChatAnswer is writeAnswer for chat completions.
func writeChatAnswer(w http.ResponseWriter, conv *conversation, id, model, text string, out int) {
	now := time.Now().Unix()
	usage := map[string]int{"prompt_tokens": 0, "completion_tokens": out, "total_tokens": out}
	if !conv.stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": now, "model": model,
			"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   usage})
		return
	}
	s := startEvents(w)
	chunk := func(choices any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": now, "model": model, "choices": choices}
	}
	s.event("", chunk([]map[string]any{{"index": 0, "delta": map[string]string{"role": "assistant", "content": text}, "finish_reason": nil}}))
	s.event("", chunk([]map[string]any{{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}))
	if gjson.GetBytes(conv.body, "stream_options.include_usage").Bool() {
		c := chunk([]any{})
		c["usage"] = usage
		s.event("", c)
	}
	s.event("", "[DONE]")
}

// writeAnthropicAnswer is writeAnswer for Anthropic messages.
func writeAnthropicAnswer(w http.ResponseWriter, stream bool, id, model, text string, out int) {
	msg := map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
		"content": []map[string]any{{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 0, "output_tokens": out}}
	if !stream {
		writeJSON(w, msg)
		return
	}
	s := startEvents(w)
	start := maps.Clone(msg)
	start["content"], start["stop_reason"] = []any{}, nil
	s.event("message_start", map[string]any{"type": "message_start", "message": start})
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": text}})
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": out}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// writeResponsesAnswer is writeAnswer for the Responses API: a response
// with one output message, or its events from response.created to
// response.completed.
func writeResponsesAnswer(w http.ResponseWriter, stream bool, id, model, text string, out int) {
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	item := map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant", "content": []any{part}}
	resp := map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "status": "completed", "model": model,
		"output": []any{item}, "error": nil, "incomplete_details": nil, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": 0, "output_tokens": out, "total_tokens": out,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}}
	if !stream {
		writeJSON(w, resp)
		return
	}
	s := startEvents(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		s.event(typ, fields)
	}
	started := maps.Clone(resp)
	started["status"], started["output"], started["usage"] = "in_progress", []any{}, nil
	ev("response.created", map[string]any{"response": started})
	open := map[string]any{"type": "message", "id": "msg_" + id, "status": "in_progress", "role": "assistant", "content": []any{}}
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": open})
	at := map[string]any{"item_id": "msg_" + id, "output_index": 0, "content_index": 0}
	with := func(k string, v any) map[string]any {
		m := maps.Clone(at)
		m[k] = v
		return m
	}
	ev("response.content_part.added", with("part", map[string]any{"type": "output_text", "text": "", "annotations": []any{}}))
	ev("response.output_text.delta", with("delta", text))
	ev("response.output_text.done", with("text", text))
	ev("response.content_part.done", with("part", part))
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp})
}

// events writes server-sent events, flushing each.
type events struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startEvents(w http.ResponseWriter) *events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &events{w: w, rc: http.NewResponseController(w)}
}

// event writes one event; name is left out when empty (OpenAI chat's
// style), and a string v is written as it is ("[DONE]").
func (e *events) event(name string, v any) {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	if s, ok := v.(string); ok {
		b.WriteString(s)
	} else {
		data, _ := json.Marshal(v)
		b.Write(data)
	}
	b.WriteString("\n\n")
	if _, err := e.w.Write(b.Bytes()); err == nil {
		_ = e.rc.Flush()
	}
}

// writeJSON writes v as a 200 JSON answer.
func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
