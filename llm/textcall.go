package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// textToolCall recovers a tool call that a model wrote as text instead of
// in the reply's tool_calls: Qwen2.5-Coder-1.5B-Instruct under llama.cpp
// answers tool_choice required with a ```json fenced {"name", "arguments"}
// object (often several, one per call it plans) that the server's
// tool-call parser, which expects <tool_call> tags, leaves in the content.
// The first JSON object in content naming one of tools, with arguments as
// an object (or a string holding one), is the call; later ones are
// dropped, since the model wrote them before seeing the first one's
// result. ok is false when content holds no such object.
func textToolCall(content string, tools []Tool) (call ToolCall, ok bool) {
	known := make(map[string]bool, len(tools))
	for _, t := range tools {
		known[t.Name] = true
	}
	for i := strings.IndexByte(content, '{'); i >= 0; {
		var v struct {
			Name       string          `json:"name"`
			Arguments  json.RawMessage `json:"arguments"`
			Parameters json.RawMessage `json:"parameters"` // Llama 3's spelling
		}
		if json.NewDecoder(strings.NewReader(content[i:])).Decode(&v) == nil && known[v.Name] {
			if args, ok := callArguments(v.Arguments, v.Parameters); ok {
				return ToolCall{ID: fmt.Sprintf("call_text_%s", v.Name), Name: v.Name, Arguments: args}, true
			}
		}
		next := strings.IndexByte(content[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return ToolCall{}, false
}

// callArguments is the arguments object of a call written as text, from
// whichever of the two keys holds one; a string holding an object counts.
func callArguments(raws ...json.RawMessage) (string, bool) {
	for _, raw := range raws {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = json.RawMessage(s)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && obj != nil {
			return string(raw), true
		}
	}
	return "", false
}
