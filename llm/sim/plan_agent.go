package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// The plan agent plays environments whose task spells out its plan (office,
// and external environments in tests): docs/embedded-model.md, "Plan agent".

// planLineRE is one plan step: `N. tool {json arguments}`.
var planLineRE = regexp.MustCompile(`^\s*(\d+)\.\s+([A-Za-z0-9_-]+)\s+(\{.*\})\s*$`)

// slotRE is a fact the step needs: {{R of E}}.
var slotRE = regexp.MustCompile(`\{\{([a-z][a-z ]*?) of ([A-Z][A-Za-z0-9-]*(?: [A-Z][A-Za-z0-9-]*)?)\}\}`)

type planStep struct {
	tool string
	args any // decoded JSON, slots still in its strings
}

// parsePlan reads the steps after a `Plan:` line of the task message; ok
// is false when there is none.
func parsePlan(text string) ([]planStep, bool) {
	_, after, ok := strings.Cut("\n"+text, "\n"+templates.TaskPlan+"\n")
	if !ok {
		return nil, false
	}
	var steps []planStep
	for line := range strings.Lines(after) {
		m := planLineRE.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if m == nil {
			if len(steps) > 0 {
				break
			}
			continue
		}
		var args any
		if json.Unmarshal([]byte(m[3]), &args) != nil {
			continue
		}
		steps = append(steps, planStep{tool: m[2], args: args})
	}
	return steps, len(steps) > 0
}

// planReply plays the plan agent when the first user message has a plan.
func planReply(msgs []llm.Message) (agentTurn, bool) {
	var steps []planStep
	found := false
	for _, m := range msgs {
		if m.Role == "user" {
			steps, found = parsePlan(m.Content)
			break
		}
	}
	if !found {
		return agentTurn{}, false
	}
	c := ctxBufs.Get().(*agentContext)
	defer ctxBufs.Put(c)
	newAgentContext(msgs, c)
	next := 0
	if call, ok := lastToolCall(msgs); ok {
		for i := len(steps) - 1; i >= 0; i-- {
			if steps[i].matches(call) {
				next = min(i+1, len(steps)-1)
				break
			}
		}
	}
	s := steps[next]
	args, _ := json.Marshal(fillSlots(s.args, c))
	return agentTurn{
		Thought: fmt.Sprintf("Plan step %d of %d.", next+1, len(steps)),
		Call:    toolCall{Name: s.tool, Args: string(args)},
	}, true
}

// lastToolCall is the last tool call visible in the context.
func lastToolCall(msgs []llm.Message) (llm.ToolCall, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if tc := msgs[i].ToolCalls; len(tc) > 0 {
			return tc[0], true
		}
	}
	return llm.ToolCall{}, false
}

// matches reports whether call is this step: same tool, same arguments
// where the step has no slot.
func (s planStep) matches(call llm.ToolCall) bool {
	if call.Name != s.tool {
		return false
	}
	var got any
	if json.Unmarshal([]byte(call.Arguments), &got) != nil {
		return false
	}
	return sameShape(s.args, got)
}

func sameShape(want, got any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && slotPattern(w).MatchString(g)
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if !sameShape(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameShape(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	g, _ := json.Marshal(got)
	x, _ := json.Marshal(want)
	return string(g) == string(x)
}

// slotPattern matches the strings a template string can become: its
// literal parts as they are, any text where a slot was.
func slotPattern(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range slotRE.FindAllStringIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		b.WriteString("(?s:.*)")
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// fillSlots replaces every {{R of E}} with the answer the context states,
// or unknownAnswer when it states none.
func fillSlots(v any, c *agentContext) any {
	switch x := v.(type) {
	case string:
		return slotRE.ReplaceAllStringFunc(x, func(slot string) string {
			m := slotRE.FindStringSubmatch(slot)
			if a, ok := c.answer(question{Rel: m[1], Ent: m[2]}); ok {
				return a
			}
			return unknownAnswer
		})
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fillSlots(e, c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fillSlots(e, c)
		}
		return out
	}
	return v
}
