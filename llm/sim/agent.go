package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/tidwall/gjson"
)

// maxAttempts is the number of distinct searches after which an unanswered
// question is given up.
const maxAttempts = 3

// unknownAnswer is what the agent submits for a question it gave up.
const unknownAnswer = "unknown"

// toolCall is one call the agent makes.
type toolCall struct {
	Name, Args string
}

// agentTurn is the agent's reply: a short thought and one tool call.
type agentTurn struct {
	Thought string
	Call    toolCall
}

// agentContext is what the agent can see: the text of every message but the
// system prompt (tool-call arguments included), and the distinct search
// queries it shows.
type agentContext struct {
	text, lower []byte
	// queries are the lower-case distinct queries, in order of appearance.
	queries []string
	// spent: the environment said the task's search budget is spent.
	spent bool
	// last: the harness said this step is the last (rollout.LastStepNotice).
	last bool
}

// ctxBufs recycles the context buffers: agent calls are the bulk of the
// traffic and their contexts run to tens of kilobytes.
var ctxBufs = sync.Pool{New: func() any { return new(agentContext) }}

func newAgentContext(msgs []llm.Message, c *agentContext) {
	c.text, c.queries = c.text[:0], c.queries[:0]
	seen := map[string]bool{}
	add := func(q string) {
		if q = asciiLower(strings.TrimSpace(q)); q != "" && !seen[q] {
			seen[q] = true
			c.queries = append(c.queries, q)
		}
	}
	for _, m := range msgs {
		if m.Role == "system" || m.Role == "developer" {
			continue
		}
		c.text = append(c.text, m.Content...)
		c.text = append(c.text, '\n')
		for _, tc := range m.ToolCalls {
			c.text = append(c.text, tc.Arguments...)
			c.text = append(c.text, '\n')
			if tc.Name == "search" {
				add(searchQuery(tc.Arguments))
			}
		}
		// Summaries (and refined observations) list earlier searches as
		// `- "query"` lines.
		if strings.Contains(m.Content, "- \"") {
			for _, q := range queryLines(m.Content) {
				add(q)
			}
		}
	}
	c.lower = append(c.lower[:0], c.text...)
	for i, b := range c.lower {
		if 'A' <= b && b <= 'Z' {
			c.lower[i] = b + 'a' - 'A'
		}
	}
	c.spent = bytes.Contains(c.lower, searchBudgetSpent)
	c.last = bytes.Contains(c.lower, lastStepNotice)
}

// lastStepNotice is how the rollout says a step is the agent's last.
var lastStepNotice = []byte("this is your last action")

// searchBudgetSpent is what qa answers a search beyond the task's search
// budget with (env.SearchBudgetSpent).
var searchBudgetSpent = []byte("the search budget of this task is spent")

// searchQuery returns the "query" of search arguments, "" when they are not
// valid JSON.
func searchQuery(args string) string {
	if !gjson.Valid(args) {
		return ""
	}
	return gjson.Get(args, "query").String()
}

// answer returns the first statement in the context that answers q: `the R
// of E is A.`, `E's R is A.` or a fact-cache line `R of E: A` (also `->`,
// `=`). Form-3 archive sentences are not read. Four of the five forms
// contain "R of E", so two scans of the context find them all.
func (c *agentContext) answer(q question) (string, bool) {
	if q.Rel == "" {
		return "", false
	}
	r, e := asciiLower(q.Rel), asciiLower(q.Ent)
	best, bestAns := len(c.lower), ""
	roe := []byte(r + " of " + e)
	for off := 0; off < len(c.lower); {
		i := bytes.Index(c.lower[off:], roe)
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		rest := c.lower[i+len(roe):]
		var at, pos int
		switch {
		case bytes.HasPrefix(rest, []byte(" is ")) && i >= 4 && string(c.lower[i-4:i]) == "the ":
			at, pos = i+len(roe)+4, i-4
		case bytes.HasPrefix(rest, []byte(": ")):
			at, pos = i+len(roe)+2, i
		case bytes.HasPrefix(rest, []byte(" -> ")):
			at, pos = i+len(roe)+4, i
		case bytes.HasPrefix(rest, []byte(" = ")):
			at, pos = i+len(roe)+3, i
		default:
			continue
		}
		if pos > 0 && isWordByte(c.lower[pos-1]) {
			continue
		}
		if a := cutAnswer(c.text[at:]); a != "" {
			best, bestAns = pos, a
			break
		}
	}
	poss := []byte(e + "'s " + r + " is ")
	for off := 0; off < best; {
		// Only a match before the best so far can win.
		i := bytes.Index(c.lower[off:min(len(c.lower), best+len(poss))], poss)
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		if a := cutAnswer(c.text[i+len(poss):]); a != "" {
			best, bestAns = i, a
			break
		}
	}
	return bestAns, bestAns != ""
}

// cutAnswer returns b up to the first period or end of line, trimmed.
func cutAnswer(b []byte) string {
	if i := bytes.IndexAny(b, ".\n"); i >= 0 {
		b = b[:i]
	}
	return cleanAnswer(strings.TrimSpace(string(b)))
}

// attempts counts the distinct visible queries that mention q's entity.
func (c *agentContext) attempts(q question) int {
	e := asciiLower(q.Ent)
	n := 0
	for _, s := range c.queries {
		if strings.Contains(s, e) {
			n++
		}
	}
	return n
}

// cachedLine reports whether a summary's FACT CACHE has a line for q
// (`- Qn: <statement>`); a PENDING line (`- Qn: <question>?`) is no answer.
func (c *agentContext) cachedLine(q question) bool {
	mark := []byte(fmt.Sprintf("\n- Q%d: ", q.N))
	for off := 0; ; {
		i := bytes.Index(c.text[off:], mark)
		if i < 0 {
			return false
		}
		line := c.text[off+i+len(mark):]
		if nl := bytes.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl]
		}
		if l := bytes.TrimSpace(line); len(l) > 0 && l[len(l)-1] != '?' {
			return true
		}
		off += i + len(mark)
	}
}

func (c *agentContext) visible(query string) bool {
	return slices.Contains(c.queries, asciiLower(query))
}

// taskQuestions parses the questions of the task, the first user message.
func taskQuestions(msgs []llm.Message) []question {
	for _, m := range msgs {
		if m.Role == "user" {
			return parseQuestions(m.Content)
		}
	}
	return nil
}

// agentReply decides the agent's next call from what its context shows.
func agentReply(msgs []llm.Message) agentTurn {
	qs := taskQuestions(msgs)
	c := ctxBufs.Get().(*agentContext)
	defer ctxBufs.Put(c)
	newAgentContext(msgs, c)
	answers := make([]string, len(qs))
	for i, q := range qs {
		if a, ok := c.answer(q); ok {
			answers[i] = a
			continue
		}
		n := c.attempts(q)
		// A FACT CACHE line for the question means its lookup is done even
		// when the agent cannot read the answer from it (form 3).
		if q.Rel == "" || n >= maxAttempts || c.cachedLine(q) || c.spent || c.last {
			answers[i] = unknownAnswer
			continue
		}
		return searchTurn(c, q, n)
	}
	return finishTurn("Every question is answered or given up; submitting the answers.", answers)
}

// searchTurn looks q up for the (n+1)th time.
func searchTurn(c *agentContext, q question, n int) agentTurn {
	args, _ := json.Marshal(struct {
		Query string `json:"query"`
	}{nextQuery(c, q, n)})
	return agentTurn{Thought: fmt.Sprintf("Looking up Q%d, try %d.", q.N, n+1), Call: toolCall{Name: "search", Args: string(args)}}
}

func finishTurn(thought string, answers []string) agentTurn {
	args, _ := json.Marshal(struct {
		Answers []string `json:"answers"`
	}{answers})
	return agentTurn{Thought: thought, Call: toolCall{Name: "finish", Args: string(args)}}
}

// nextQuery is attempt n's query: the question, then "E R", then "E". A
// query already visible is skipped for the next one, so a context that lost
// some of its searches does not repeat the same one forever.
func nextQuery(c *agentContext, q question, n int) string {
	cands := [maxAttempts]string{q.Text, q.Ent + " " + q.Rel, q.Ent}
	for k := range maxAttempts {
		if cand := cands[(n+k)%maxAttempts]; !c.visible(cand) {
			return cand
		}
	}
	return cands[n]
}
