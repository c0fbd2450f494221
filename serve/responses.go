package serve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm"
)

// The OpenAI Responses API (POST /v1/responses) is proxied like chat
// completions: its input items are read as messages, so the same
// sessions, summaries and cuts apply. A message item is a message; the
// model's output items between two inputs (reasoning, assistant text,
// function and custom tool calls, built-in tool calls) are one assistant
// message, so parallel calls are never cut apart; an item whose type ends
// in _output answers them as a tool message. Compaction items are opaque.

// parseResponses reads the input of a Responses request (c.msgs) and its
// instructions. A request that continues a stored response
// (previous_response_id, conversation) sends only its new items: there is
// no history to compress, so it goes as sent (uncounted).
func (c *conversation) parseResponses(instructions gjson.Result, stateful bool, uncounted func(msgs string) bool) error {
	if instructions.Exists() && instructions.Type != gjson.Null && instructions.Type != gjson.String {
		return errors.New("instructions: want a string")
	}
	c.system = instructions.Str
	switch {
	case c.msgs.Type == gjson.String:
		// A bare string is one user message.
		c.uncounted = stateful || uncounted != nil && uncounted(c.msgs.Raw)
		c.add(c.msgs.Raw, "user", false, []llm.Message{{Role: "user", Content: c.msgs.Str}})
		c.findHead()
		return nil
	case !c.msgs.IsArray():
		return errors.New("input: want a string or an array of input items")
	}
	c.uncounted = stateful || uncounted != nil && uncounted(c.msgs.Raw)
	var err error
	i := 0
	var run []string // the output items of the turn being read
	var turn llm.Message
	flush := func() {
		if len(run) > 0 {
			c.add(strings.Join(run, ","), "assistant", false, []llm.Message{turn})
			run, turn = nil, llm.Message{}
		}
	}
	c.msgs.ForEach(func(_, it gjson.Result) bool {
		var kind string
		if kind, err = c.responseItem(it, &turn); err != nil {
			err = fmt.Errorf("input[%d]: %w", i, err)
			return false
		}
		i++
		if kind == "output" {
			run = append(run, it.Raw)
			return true
		}
		flush()
		switch kind {
		case compactionType:
			c.add(it.Raw, "", true, nil)
		case "tool":
			m := llm.Message{Role: "tool", ToolCallID: it.Get("call_id").Str, Content: responsesText(it.Get("output"))}
			c.add(it.Raw, "tool", false, []llm.Message{m})
		default: // a message of role kind
			c.add(it.Raw, kind, false, []llm.Message{{Role: kind, Content: responsesText(it.Get("content"))}})
		}
		return true
	})
	if err != nil {
		return err
	}
	flush()
	if len(c.raw) == 0 {
		return errors.New("input: empty; send at least one item")
	}
	c.findHead()
	return nil
}

// responseItem classifies one input item: "output" for an item of the
// model's turn (folded into turn), compactionType, "tool" for an answer
// to a call, or the role of a message.
func (c *conversation) responseItem(it gjson.Result, turn *llm.Message) (string, error) {
	if !it.IsObject() {
		return "", errors.New("want an object")
	}
	typ, role := it.Get("type").Str, it.Get("role")
	switch {
	case typ == compactionType:
		return compactionType, nil
	case typ == "message" || typ == "" && role.Exists():
		content := it.Get("content")
		if content.Type != gjson.String && !content.IsArray() {
			return "", errors.New("content: want a string or an array of content parts")
		}
		switch role.Str {
		case "user", "system", "developer":
			return role.Str, nil
		case "assistant":
			turn.Role = "assistant"
			turn.Content = joinText(turn.Content, responsesText(content))
			return "output", nil
		}
		return "", fmt.Errorf("role: unknown role %q; want user, assistant, system or developer", role.String())
	case typ == "":
		return "", errors.New("type: missing; want message, function_call, function_call_output or another input item type")
	case strings.HasSuffix(typ, "_output"):
		return "tool", nil
	}
	turn.Role = "assistant"
	switch typ {
	case "function_call":
		turn.ToolCalls = append(turn.ToolCalls, llm.ToolCall{ID: it.Get("call_id").Str, Name: it.Get("name").Str, Arguments: it.Get("arguments").Str})
	case "custom_tool_call":
		turn.ToolCalls = append(turn.ToolCalls, llm.ToolCall{ID: it.Get("call_id").Str, Name: it.Get("name").Str, Arguments: it.Get("input").Str})
	}
	return "output", nil
}

// responsesText is the text of a Responses content or output: a string,
// or the text of its parts (input_text, output_text, text).
func responsesText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	var texts []string
	v.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").Str {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Get("text").Str)
		}
		return true
	})
	return strings.Join(texts, "\n")
}

func joinText(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n" + b
}
