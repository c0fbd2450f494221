package llm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// The readers below turn wire-format messages (untrusted JSON, already
// checked valid) into Messages. The embedded model and the serve proxy
// read requests with them, so both understand the formats alike.

var openAIRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// OpenAIMessage reads one message of an OpenAI chat request, walking the
// object once (contexts are long and this is on every request's path).
func OpenAIMessage(m gjson.Result) (Message, error) { return openAIMessage(m, true) }

// CheckOpenAIMessage makes OpenAIMessage's checks alone, for a reader
// that only passes the message on.
func CheckOpenAIMessage(m gjson.Result) error {
	_, err := openAIMessage(m, false)
	return err
}

// openAIMessage reads m; without build, it leaves out the tool calls and
// the content, whose type it checks.
func openAIMessage(m gjson.Result, build bool) (Message, error) {
	var msg Message
	var role, content gjson.Result
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			role = v
		case "content":
			content = v
		case "tool_call_id":
			msg.ToolCallID = v.String()
		case "name":
			msg.Name = v.String()
		case "tool_calls":
			if !build {
				break
			}
			v.ForEach(func(_, c gjson.Result) bool {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{
					ID: c.Get("id").String(), Name: c.Get("function.name").String(),
					Arguments: c.Get("function.arguments").String(),
				})
				return true
			})
		}
		return true
	})
	if role.Type != gjson.String || !openAIRoles[role.Str] {
		return msg, fmt.Errorf("role: unknown role %q; want system, developer, user, assistant or tool", role.String())
	}
	msg.Role = role.Str
	var err error
	if build {
		msg.Content, err = OpenAIText(content)
	} else {
		err = checkText(content, openAIWant)
	}
	if err != nil {
		return msg, fmt.Errorf("content: %w", err)
	}
	return msg, nil
}

const (
	openAIWant    = "want a string or an array of content parts"
	anthropicWant = "want a string or an array of content blocks"
)

// OpenAIText reads a content: a string, null, or an array of parts of
// which the text parts (and untyped ones) are kept.
func OpenAIText(v gjson.Result) (string, error) {
	return textParts(v, true, openAIWant)
}

// AnthropicText reads an Anthropic content or system field: a string or
// an array of blocks of which the text blocks are kept.
func AnthropicText(v gjson.Result) (string, error) {
	return textParts(v, false, anthropicWant)
}

// checkText is textParts' check of v's type.
func checkText(v gjson.Result, want string) error {
	if !v.Exists() || v.Type == gjson.Null || v.Type == gjson.String || v.IsArray() {
		return nil
	}
	return errors.New(want)
}

func textParts(v gjson.Result, untyped bool, want string) (string, error) {
	if err := checkText(v, want); err != nil {
		return "", err
	}
	switch {
	case v.Type == gjson.String:
		return v.Str, nil
	case v.IsArray():
		var texts []string
		v.ForEach(func(_, p gjson.Result) bool {
			if t := p.Get("type").String(); t == "text" || untyped && t == "" {
				texts = append(texts, p.Get("text").String())
			}
			return true
		})
		return strings.Join(texts, "\n"), nil
	}
	return "", nil
}

// AnthropicMessage reads one message of an Anthropic Messages request.
// tool_use blocks become tool calls (their input JSON the arguments), and
// each tool_result block a tool message, before any text of the same user
// message, so the result follows its call as in the OpenAI format.
func AnthropicMessage(m gjson.Result) ([]Message, error) {
	return anthropicMessage(m, true)
}

// CheckAnthropicMessage makes AnthropicMessage's checks alone, for a
// reader that only passes the message on.
func CheckAnthropicMessage(m gjson.Result) error {
	_, err := anthropicMessage(m, false)
	return err
}

// anthropicMessage reads m; without build, it only checks the content's
// blocks.
func anthropicMessage(m gjson.Result, build bool) ([]Message, error) {
	if !m.IsObject() {
		return nil, errors.New("want an object")
	}
	role := m.Get("role")
	if role.Str != "user" && role.Str != "assistant" {
		return nil, fmt.Errorf("role: %q is not user or assistant", role.String())
	}
	content := m.Get("content")
	if content.Type == gjson.String {
		if !build {
			return nil, nil
		}
		return []Message{{Role: role.Str, Content: content.Str}}, nil
	}
	if !content.IsArray() {
		return nil, errors.New("content: " + anthropicWant)
	}
	main := Message{Role: role.Str}
	var texts []string
	var results []Message
	var err error
	content.ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			if build {
				texts = append(texts, b.Get("text").String())
			}
		case "tool_use":
			if build {
				main.ToolCalls = append(main.ToolCalls, ToolCall{ID: b.Get("id").String(), Name: b.Get("name").String(), Arguments: b.Get("input").Raw})
			}
		case "tool_result":
			var t string
			if build {
				t, err = AnthropicText(b.Get("content"))
			} else {
				err = checkText(b.Get("content"), anthropicWant)
			}
			if err != nil {
				err = fmt.Errorf("tool_result content: %w", err)
				return false
			}
			if build {
				results = append(results, Message{Role: "tool", ToolCallID: b.Get("tool_use_id").String(), Content: t})
			}
		}
		return true
	})
	if err != nil || !build {
		return nil, err
	}
	main.Content = strings.Join(texts, "\n")
	if role.Str == "user" {
		if main.Content == "" && len(results) > 0 {
			return results, nil
		}
		return append(results, main), nil
	}
	return []Message{main}, nil
}
