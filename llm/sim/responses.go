package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm"
)

// The OpenAI Responses API, minimally: enough for proxies (optimize
// serve) to be tested against its wire format. The answers are those of
// the chat endpoint; only their framing differs.

// parseResponses reads a Responses request into a chat request:
// instructions become a system message, message items messages,
// function_call items the assistant's tool calls (consecutive ones one
// message) and function_call_output items tool messages. Other items
// (reasoning, compaction) are not read.
func parseResponses(body []byte) (chatRequest, error) {
	var req chatRequest
	root, err := parseObject(body)
	if err != nil {
		return req, err
	}
	req.Model = root.Get("model").String()
	req.MaxTokens = int(root.Get("max_output_tokens").Int())
	req.Stream = root.Get("stream").Bool()
	req.Temperature = root.Get("temperature").Float()
	if s := root.Get("instructions").String(); s != "" {
		req.Messages = append(req.Messages, llm.Message{Role: "system", Content: s})
	}
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").Str == "function" {
			req.Tools = append(req.Tools, llm.Tool{Name: t.Get("name").String(), Description: t.Get("description").String(), Parameters: json.RawMessage(t.Get("parameters").Raw)})
		}
		return true
	})
	input := root.Get("input")
	if input.Type == gjson.String {
		req.Messages = append(req.Messages, llm.Message{Role: "user", Content: input.Str})
		return req, nil
	}
	if !input.IsArray() {
		return req, errors.New("input: want a string or an array of items")
	}
	i := 0
	input.ForEach(func(_, it gjson.Result) bool {
		if err = addItem(&req, it); err != nil {
			err = fmt.Errorf("input[%d]: %w", i, err)
			return false
		}
		i++
		return true
	})
	if err == nil && len(req.Messages) == 0 {
		err = errors.New("input: no message; send at least one")
	}
	return req, err
}

// addItem adds one input item to req's messages.
func addItem(req *chatRequest, it gjson.Result) error {
	switch typ := it.Get("type").Str; {
	case typ == "function_call":
		call := llm.ToolCall{ID: it.Get("call_id").String(), Name: it.Get("name").String(), Arguments: it.Get("arguments").String()}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
			req.Messages[n-1].ToolCalls = append(req.Messages[n-1].ToolCalls, call)
		} else {
			req.Messages = append(req.Messages, llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call}})
		}
	case typ == "function_call_output":
		req.Messages = append(req.Messages, llm.Message{Role: "tool", ToolCallID: it.Get("call_id").String(), Content: itemText(it.Get("output"))})
	case typ == "message" || typ == "" && it.Get("role").Exists():
		role := it.Get("role").Str
		if role != "user" && role != "assistant" && role != "system" && role != "developer" {
			return fmt.Errorf("role: %q is not user, assistant, system or developer", role)
		}
		req.Messages = append(req.Messages, llm.Message{Role: role, Content: itemText(it.Get("content"))})
	}
	return nil
}

// itemText is a content or output: a string or the text of its parts.
func itemText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	var texts []string
	v.ForEach(func(_, p gjson.Result) bool {
		texts = append(texts, p.Get("text").String())
		return true
	})
	return strings.Join(texts, "\n")
}

// responses serves POST /v1/responses.
func (h *handler) responses(w http.ResponseWriter, r *http.Request) {
	h.serveChat(w, r, parseResponses, h.writeResponse)
}

// toResponse frames the first choice of resp as a Responses object: a
// message item for its text, a function_call item per tool call.
func toResponse(resp chatResponse) map[string]any {
	c := resp.Choices[0]
	id := "resp_" + strings.TrimPrefix(resp.ID, "chatcmpl-")
	output := []any{}
	if c.Message.Content != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": c.Message.Content, "annotations": []any{}}}})
	}
	for _, tc := range c.Message.ToolCalls {
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + tc.ID, "call_id": tc.ID,
			"name": tc.Function.Name, "arguments": tc.Function.Arguments, "status": "completed"})
	}
	status := "completed"
	var incomplete any
	if c.FinishReason == "length" {
		status, incomplete = "incomplete", map[string]string{"reason": "max_output_tokens"}
	}
	return map[string]any{"id": id, "object": "response", "created_at": resp.Created, "status": status, "model": resp.Model,
		"output": output, "error": nil, "incomplete_details": incomplete, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": resp.Usage.PromptTokens, "output_tokens": resp.Usage.CompletionTokens,
			"total_tokens": resp.Usage.TotalTokens, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens_details": map[string]int{"reasoning_tokens": 0}}}
}

// writeResponse answers a Responses request: the response, or its events
// from response.created to response.completed, text and arguments in
// deltas.
func (h *handler) writeResponse(ctx context.Context, w http.ResponseWriter, a admission, req chatRequest, resp chatResponse) {
	final := toResponse(resp)
	if !req.Stream {
		h.reply(ctx, w, a, final)
		return
	}
	if h.until(ctx, a.deadline) == waitGone {
		return
	}
	s := startSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		s.event(typ, fields)
	}
	started := maps.Clone(final)
	started["status"], started["output"] = "in_progress", []any{}
	ev("response.created", map[string]any{"response": started})
	for i, item := range final["output"].([]any) {
		it := item.(map[string]any)
		open := maps.Clone(it)
		open["status"] = "in_progress"
		at := func(k string, v any) map[string]any {
			return map[string]any{"item_id": it["id"], "output_index": i, k: v}
		}
		if it["type"] == "message" {
			part := it["content"].([]any)[0].(map[string]any)
			text := part["text"].(string)
			open["content"] = []any{}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": open})
			empty := maps.Clone(part)
			empty["text"] = ""
			ev("response.content_part.added", withIndex(at("part", empty)))
			for _, p := range pieces(text) {
				ev("response.output_text.delta", withIndex(at("delta", p)))
			}
			ev("response.output_text.done", withIndex(at("text", text)))
			ev("response.content_part.done", withIndex(at("part", part)))
		} else {
			open["arguments"] = ""
			ev("response.output_item.added", map[string]any{"output_index": i, "item": open})
			for _, p := range pieces(it["arguments"].(string)) {
				ev("response.function_call_arguments.delta", at("delta", p))
			}
			ev("response.function_call_arguments.done", at("arguments", it["arguments"]))
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	ev("response.completed", map[string]any{"response": final})
}

// withIndex adds the content index (one text part per message) to an
// event's fields.
func withIndex(fields map[string]any) map[string]any {
	fields["content_index"] = 0
	return fields
}
