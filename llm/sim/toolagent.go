package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/llm"
)

// Tools beyond search and finish that change how the agent plays
// (docs/embedded-model.md, "Agent: answer and glimpse").
const (
	answerToolName  = "answer"
	glimpseToolName = "glimpse"
	searchToolName  = "search"
	// readInputToolName shows a workflow's input once (PAACE-Syn).
	readInputToolName = "read_input"
	// glimpseMax is PACE's limit of chunks per glimpse call.
	glimpseMax = 3
)

var (
	nextRe        = regexp.MustCompile(`Next unanswered: Q(\d+)\.`)
	answeredArgRe = regexp.MustCompile(`"question"\s*:\s*(\d+)`)
	chunkLineRe   = regexp.MustCompile(`(?m)^\[chunk (\d+) \| (brief|placeholder)\] (.*)$`)
	glimpsedRe    = regexp.MustCompile(`"chunks"\s*:\s*\[([0-9,\s]*)\]`)
	shownQueryRe  = regexp.MustCompile(`"query"\s*:\s*"((?:[^"\\]|\\.)*)"|searched "([^"]*)"`)
)

// toolAgentReply is the agent's reply to a request offering the answer
// tool (long-horizon qa: answer one question at a time, in order) or the
// glimpse tool (PACE: look at a hidden chunk that mentions the entity of
// the question at hand before searching again). Without them it is
// agentReply.
func toolAgentReply(msgs []llm.Message, tools []llm.Tool) agentTurn {
	var o offered
	for _, t := range tools {
		o.finish = o.finish || t.Name == "finish"
		o.answer = o.answer || t.Name == answerToolName
		o.glimpse = o.glimpse || t.Name == glimpseToolName
		o.search = o.search || t.Name == searchToolName
		o.readInput = o.readInput || t.Name == readInputToolName
	}
	// Read the input first, while the context shows no turn of the agent.
	if o.readInput && !slices.ContainsFunc(msgs, func(m llm.Message) bool { return m.Role == "assistant" }) {
		return agentTurn{Thought: "Reading the input first.", Call: toolCall{Name: readInputToolName, Args: "{}"}}
	}
	if !o.answer && !o.glimpse {
		return agentReply(msgs)
	}
	qs := taskQuestions(msgs)
	c := ctxBufs.Get().(*agentContext)
	defer ctxBufs.Put(c)
	newAgentContext(msgs, c)
	if o.answer {
		return answerModeReply(msgs, qs, c, o)
	}
	// Finish mode: glimpse for the question agentReply would search for
	// next, unless this step is the last (agentReply then finishes).
	for _, q := range qs {
		if c.last {
			break
		}
		if _, ok := c.answer(q); ok || q.Rel == "" || c.attempts(q) >= maxAttempts || c.cachedLine(q) {
			continue
		}
		if ids := hiddenChunks(c, q); len(ids) > 0 {
			return glimpseTurn(q, ids)
		}
		break
	}
	return agentReply(msgs)
}

// offered are the tools of a request that change how the agent plays.
type offered struct {
	answer, glimpse, search, readInput, finish bool
}

// answerModeReply works on one question at a time with the answer tool.
func answerModeReply(msgs []llm.Message, qs []question, c *agentContext, o offered) agentTurn {
	total := len(qs)
	if total == 0 {
		// A workflow gives each step's question when the step begins.
		qs = givenQuestions(msgs)
		for _, q := range qs {
			total = max(total, q.N)
		}
	}
	n := nextQuestion(c, total)
	if c.last && o.finish {
		// The last step: submit every answer the context shows; the ones
		// recorded with the answer tool stay where this one has none.
		answers := make([]string, len(qs))
		for i, q := range qs {
			answers[i], _ = c.answer(q)
		}
		return finishTurn("This is the last step; submitting what I have.", answers)
	}
	if n == 0 {
		return agentTurn{Thought: "Every question has an answer; finishing.", Call: toolCall{Name: "finish", Args: `{"answers":[]}`}}
	}
	i := slices.IndexFunc(qs, func(q question) bool { return q.N == n })
	if i < 0 {
		// The question is not in the context (a compression dropped it):
		// nothing to look for.
		return answerTurn(question{N: n}, unknownAnswer)
	}
	q := qs[i]
	if a, ok := c.answer(q); ok {
		return answerTurn(q, a)
	}
	if o.glimpse {
		if ids := hiddenChunks(c, q); len(ids) > 0 {
			return glimpseTurn(q, ids)
		}
	}
	tries := max(c.attempts(q), shownAttempts(c, q))
	if q.Rel == "" || tries >= maxAttempts || !o.search || c.spent {
		return answerTurn(q, unknownAnswer)
	}
	return searchTurn(c, q, tries)
}

// givenQuestions are the "Qn: question" lines of every message but the
// system prompt, the first of each number.
func givenQuestions(msgs []llm.Message) []question {
	var b strings.Builder
	for _, m := range msgs {
		if m.Role != "system" && m.Role != "developer" {
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
	}
	return parseQuestions(b.String())
}

func answerTurn(q question, a string) agentTurn {
	args, _ := json.Marshal(struct {
		Question int    `json:"question"`
		Answer   string `json:"answer"`
	}{q.N, a})
	return agentTurn{Thought: fmt.Sprintf("Answering Q%d.", q.N), Call: toolCall{Name: answerToolName, Args: string(args)}}
}

func glimpseTurn(q question, ids []int) agentTurn {
	args, _ := json.Marshal(struct {
		Chunks []int `json:"chunks"`
	}{ids})
	return agentTurn{Thought: fmt.Sprintf("A hidden chunk mentions %s (Q%d); looking at it.", q.Ent, q.N), Call: toolCall{Name: glimpseToolName, Args: string(args)}}
}

// allAnswered is how qa's long-horizon variant says the work is done
// (docs/embedded-model.md, "Agent: answer and glimpse").
const allAnswered = "Every question has an answer"

// nextQuestion is the question to work on, 0 when every question has an
// answer: the last "Next unanswered" the environment reported, else the
// first question no visible answer call covers.
func nextQuestion(c *agentContext, total int) int {
	text := string(c.text)
	next := nextRe.FindAllStringSubmatchIndex(text, -1)
	lastNext, lastDone := -1, strings.LastIndex(text, allAnswered)
	if len(next) > 0 {
		lastNext = next[len(next)-1][0]
	}
	switch {
	case lastDone > lastNext:
		return 0
	case lastNext >= 0:
		m := next[len(next)-1]
		n, _ := strconv.Atoi(text[m[2]:m[3]])
		if n >= 1 && n <= total {
			return n
		}
	}
	answered := map[int]bool{}
	for _, m := range answeredArgRe.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		answered[n] = true
	}
	for n := 1; n <= total; n++ {
		if !answered[n] {
			return n
		}
	}
	return 0
}

// hiddenChunks lists up to glimpseMax chunks shown as brief or placeholder
// whose line mentions q's entity and that no visible glimpse asked for;
// chunks that are glimpses themselves are skipped (they only repeat
// others).
func hiddenChunks(c *agentContext, q question) []int {
	if q.Ent == "" {
		return nil
	}
	text := string(c.text)
	seen := map[int]bool{}
	for _, m := range glimpsedRe.FindAllStringSubmatch(text, -1) {
		for _, f := range strings.Split(m[1], ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				seen[n] = true
			}
		}
	}
	ent := asciiLower(q.Ent)
	var ids []int
	for _, m := range chunkLineRe.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		line := asciiLower(m[3])
		if seen[n] || !hasWord(line, ent) || strings.Contains(line, "glimpse(") || strings.Contains(line, "called glimpse") {
			continue
		}
		seen[n] = true
		if ids = append(ids, n); len(ids) == glimpseMax {
			break
		}
	}
	return ids
}

// shownAttempts counts the distinct searches about q's entity that the
// context shows anywhere: tool calls, and the actions PACE's placeholders
// and summaries name, so a question whose searches are compressed away is
// still given up after maxAttempts.
func shownAttempts(c *agentContext, q question) int {
	ent := asciiLower(q.Ent)
	seen := map[string]bool{}
	for _, m := range shownQueryRe.FindAllSubmatch(c.text, -1) {
		s := asciiLower(string(m[1]) + string(m[2]))
		if strings.Contains(s, ent) {
			seen[s] = true
		}
	}
	return len(seen)
}
