package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// apiFormat is the wire format of a proxied request.
type apiFormat string

const (
	formatOpenAI    apiFormat = "openai"
	formatAnthropic apiFormat = "anthropic"
	// formatResponses is the OpenAI Responses API: its input items are
	// read as messages (responses.go), its errors are OpenAI's.
	formatResponses apiFormat = "responses"
)

// conversation is a proxied request's messages, kept as the raw JSON the
// client sent (so what is passed on is byte-for-byte what came in) with an
// llm.Message view of each for counting and compressing.
type conversation struct {
	format apiFormat
	body   []byte
	// msgs is the "messages" array of body (the Responses "input").
	msgs gjson.Result
	// raw[i] is message i as sent; for the Responses API, one message is
	// an input item, or a run of the model's output items (its reasoning,
	// text and tool calls), which are one turn and never cut apart.
	raw []string
	// roles[i] is the role of raw[i] ("" for an opaque item).
	roles []string
	// opaque[i] marks a provider's compaction item, kept as sent wherever
	// the conversation is cut and never summarized (its views are empty).
	opaque []bool
	// views[i] is raw[i] as llm messages: an Anthropic user message with
	// tool results is one tool message per result.
	views [][]llm.Message
	// system is the Anthropic top-level system prompt or the Responses
	// instructions (OpenAI chat keeps it in the messages).
	system string
	// head is the number of opening messages always sent: leading system
	// messages and the first user message (the task).
	head   int
	stream bool
	// uncounted: the messages are too short to count, so they were
	// checked but not decoded (views is nil).
	uncounted bool
}

// parseConversation reads body, untrusted, in format f. Its messages are
// checked as counting reads them, and decoded for counting unless
// uncounted (nil: never) says from their bytes that they will not be.
func parseConversation(f apiFormat, body []byte, uncounted func(msgs string) bool) (*conversation, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, errors.New("body: want a JSON object")
	}
	c := &conversation{format: f, body: body}
	msgsKey, systemKey := "messages", "system"
	if f == formatResponses {
		msgsKey, systemKey = "input", "instructions"
	}
	// One walk of the top level (a Get per field would pass over the
	// messages again for each); the first of a repeated field counts.
	var stream, system gjson.Result
	stateful := false
	root.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == msgsKey && !c.msgs.Exists():
			c.msgs = v
		case k.Str == "stream" && !stream.Exists():
			stream = v
		case k.Str == systemKey && !system.Exists():
			system = v
		case f == formatResponses && (k.Str == "previous_response_id" || k.Str == "conversation"):
			stateful = stateful || v.Exists() && v.Type != gjson.Null
		}
		return true
	})
	c.stream = stream.Bool()
	var err error
	if f == formatResponses {
		err = c.parseResponses(system, stateful, uncounted)
	} else {
		err = c.parseMessages(system, uncounted)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// parseMessages reads the messages and system prompt of a chat completion
// or Anthropic request.
func (c *conversation) parseMessages(system gjson.Result, uncounted func(msgs string) bool) error {
	f := c.format
	if !c.msgs.IsArray() {
		return errors.New("messages: want an array of messages")
	}
	if f == formatAnthropic {
		sys, err := llm.AnthropicText(system)
		if err != nil {
			return fmt.Errorf("system: %w", err)
		}
		c.system = sys
	}
	c.uncounted = uncounted != nil && uncounted(c.msgs.Raw)
	var err error
	c.msgs.ForEach(func(_, m gjson.Result) bool {
		i := len(c.raw)
		var v []llm.Message
		switch {
		case c.uncounted && f == formatOpenAI:
			err = llm.CheckOpenAIMessage(m)
		case c.uncounted:
			err = llm.CheckAnthropicMessage(m)
		case f == formatOpenAI:
			var msg llm.Message
			msg, err = llm.OpenAIMessage(m)
			v = []llm.Message{msg}
		default:
			v, err = llm.AnthropicMessage(m)
		}
		if err != nil {
			err = fmt.Errorf("messages[%d]: %w", i, err)
			return false
		}
		opaque := f == formatAnthropic && hasCompactionBlock(m)
		if opaque {
			v = nil
		}
		c.add(m.Raw, m.Get("role").Str, opaque, v)
		return true
	})
	if err != nil {
		return err
	}
	if len(c.raw) == 0 {
		return errors.New("messages: empty; send at least one message")
	}
	c.findHead()
	return nil
}

// add appends one message: its JSON, role, whether it is opaque and its
// llm views (unused when uncounted).
func (c *conversation) add(raw, role string, opaque bool, views []llm.Message) {
	if opaque {
		role = ""
	}
	c.raw = append(c.raw, raw)
	c.roles = append(c.roles, role)
	c.opaque = append(c.opaque, opaque)
	if !c.uncounted {
		c.views = append(c.views, views)
	}
}

// compactionType is the type of a provider's compaction item (OpenAI
// Responses input) and of an Anthropic compaction content block: opaque
// context the provider reads, which serve keeps as sent.
const compactionType = "compaction"

// hasCompactionBlock reports whether the Anthropic message m holds a
// compaction block.
func hasCompactionBlock(m gjson.Result) bool {
	if !strings.Contains(m.Raw, `"`+compactionType+`"`) {
		return false // the common case, without a walk of the blocks
	}
	found := false
	m.Get("content").ForEach(func(_, b gjson.Result) bool {
		found = b.Get("type").Str == compactionType
		return !found
	})
	return found
}

// findHead sets head: the leading system messages and the first user
// message, always sent.
func (c *conversation) findHead() {
	for c.head < len(c.raw) && isSystem(c.role(c.head)) {
		c.head++
	}
	if c.head < len(c.raw) && c.role(c.head) == "user" {
		c.head++
	}
}

func isSystem(role string) bool { return role == "system" || role == "developer" }

// role is the wire role of message i.
func (c *conversation) role(i int) string { return c.roles[i] }

// task is the text of the first user message (the agent's instruction).
func (c *conversation) task() string {
	if c.head == 0 || isSystem(c.role(c.head-1)) {
		return ""
	}
	var parts []string
	for _, m := range c.views[c.head-1] {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "\n")
}

// flat returns the llm views of raw messages [from, to).
func (c *conversation) flat(from, to int) []llm.Message {
	var out []llm.Message
	for _, v := range c.views[from:to] {
		out = append(out, v...)
	}
	return out
}

// cutPoints are the raw indexes after the head where a turn starts (an
// assistant message). Cutting there never separates a tool call from its
// result: results always follow their call.
func (c *conversation) cutPoints() []int {
	out := compress.TurnStarts(len(c.raw)-c.head, func(i int) string { return c.role(c.head + i) })
	for i := range out {
		out[i] += c.head
	}
	return out
}

// withSummary returns the body with messages [head, cut) replaced by one
// user message presenting summary: ACON's layout of system + first user
// message + summary + the last turns. Everything else in the body is kept
// as sent. An empty summary (truncation without one) adds no message.
func (c *conversation) withSummary(summary string, cut int) ([]byte, error) {
	var msg []byte
	if summary = strings.TrimSpace(summary); summary != "" {
		text, err := templates.Render("serve_summary.tmpl", map[string]any{"summary": summary})
		if err != nil {
			return nil, err
		}
		if msg, err = json.Marshal(struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{"user", strings.TrimSpace(text)}); err != nil {
			return nil, err
		}
	}
	// The opaque messages of [head, cut) stay, in order, before the
	// summary: the provider reads them, serve cannot.
	kept := slices.Clone(c.raw[:c.head])
	for i := c.head; i < cut; i++ {
		if c.opaque[i] {
			kept = append(kept, c.raw[i])
		}
	}
	if msg != nil {
		kept = append(kept, string(msg))
	}
	kept = append(kept, c.raw[cut:]...)
	var arr bytes.Buffer
	arr.Grow(len(c.msgs.Raw))
	arr.WriteByte('[')
	for i, r := range kept {
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.WriteString(r)
	}
	arr.WriteByte(']')
	idx := c.msgs.Index
	if idx <= 0 || idx+len(c.msgs.Raw) > len(c.body) || string(c.body[idx:idx+len(c.msgs.Raw)]) != c.msgs.Raw {
		return nil, errors.New("cannot locate messages in the body")
	}
	out := make([]byte, 0, len(c.body)-len(c.msgs.Raw)+arr.Len())
	out = append(out, c.body[:idx]...)
	out = append(out, arr.Bytes()...)
	return append(out, c.body[idx+len(c.msgs.Raw):]...), nil
}
