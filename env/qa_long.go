package env

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
)

// The long-horizon variant of qa (QAOptions.QuestionsPerTask): tasks of many
// questions, answered one at a time with the answer tool, so a task takes
// hundreds of steps and the plan is the list of questions not yet answered.

const answerUsage = `{"question": 3, "answer": "your answer"}`

// answerTool records one answer.
var answerTool = ToolSpec{
	Name:        "answer",
	Description: "Record the answer to one question (by its number); call finish when every question has an answer.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"question":{"type":"integer","description":"The question number, as in Qn."},"answer":{"type":"string","description":"A short answer."}},"required":["question","answer"]}`),
}

// regroup makes tasks of n questions from the split's questions, like a
// research task about a few subjects: questions are ordered by the entity
// they ask about, cut into groups of n (a remainder shorter than n is
// dropped), and each group is shuffled deterministically, so questions
// about the same entity come at distant steps and a passage found early
// answers a question asked much later.
func regroup(tasks []Task, split string, n int) []Task {
	// Each question's keys are computed once, not at every comparison
	// (the subject's regexp on every comparison took most of opening
	// the long variant).
	type keyed struct {
		q       Question
		subject string
		hash    uint64
	}
	var ks []keyed
	for _, t := range tasks {
		for _, q := range t.Questions {
			ks = append(ks, keyed{q, subject(q.Text), textHash(q.Text)})
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return strings.Compare(a.subject, b.subject) })
	for i := 0; i+n <= len(ks); i += n {
		slices.SortStableFunc(ks[i:i+n], func(a, b keyed) int { return cmp.Compare(a.hash, b.hash) })
	}
	qs := make([]Question, len(ks))
	for i, k := range ks {
		qs[i] = k.q
	}
	var out []Task
	for i := 0; i+n <= len(qs); i += n {
		group := qs[i : i+n]
		var b strings.Builder
		for j, q := range group {
			fmt.Fprintf(&b, "Q%d: %s\n", j+1, q.Text)
		}
		out = append(out, Task{
			ID: fmt.Sprintf("qa-%s-long%d-%04d", split, n, len(out)+1), Split: split,
			Prompt: strings.TrimRight(b.String(), "\n"), Questions: group,
		})
	}
	return out
}

var subjectRe = regexp.MustCompile(`^What is the .+ of (.+)\?$`)

// subject is the entity a "What is the R of E?" question asks about, else
// the whole text.
func subject(q string) string {
	if m := subjectRe.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return q
}

func textHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// answer records one answer; the observation names the next unanswered
// question so the agent knows where it is whatever its context lost.
func (e *qaEpisode) answer(raw json.RawMessage) string {
	args, msg := objectArgs("answer", answerUsage, raw)
	if msg != "" {
		return "error: " + msg
	}
	var n int
	var ans string
	if err := json.Unmarshal(args["question"], &n); err != nil || n < 1 || n > len(e.questions) {
		return fmt.Sprintf(`error: answer field "question" must be a question number from 1 to %d; call it with %s`, len(e.questions), answerUsage)
	}
	if err := json.Unmarshal(args["answer"], &ans); err != nil {
		return `error: answer field "answer" must be a string; call it with ` + answerUsage
	}
	if e.answers == nil {
		e.answers = make([]string, len(e.questions))
		e.given = make([]bool, len(e.questions))
	}
	e.answers[n-1], e.given[n-1] = ans, true
	for i, g := range e.given {
		if !g {
			return fmt.Sprintf("Recorded the answer to Q%d. Next unanswered: Q%d.", n, i+1)
		}
	}
	return fmt.Sprintf("Recorded the answer to Q%d. Every question has an answer; call finish.", n)
}

// merged is finish's answers with the recorded ones filling the gaps.
func (e *qaEpisode) merged(finish []string) []string {
	if e.answers == nil {
		return finish
	}
	out := append([]string(nil), e.answers...)
	for i, a := range finish {
		if i < len(out) && strings.TrimSpace(a) != "" {
			out[i] = a
		}
	}
	return out
}

// Plan is the questions not yet answered, in order ("Qn: question").
func (e *qaEpisode) Plan() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for i, q := range e.questions {
		if e.given == nil || !e.given[i] {
			out = append(out, fmt.Sprintf("Q%d: %s", i+1, q.Text))
		}
	}
	return out
}

var _ Planner = (*qaEpisode)(nil)
