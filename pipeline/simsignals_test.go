package pipeline

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/rollout"
)

// TestSimReadsHarnessSignals: the embedded model reacts to two texts by
// their wording, the rollout's last-step notice and qa's reply to a search
// past the task's budget. llm/sim cannot import the packages that write
// them and keeps its own copies; this holds those copies to the real texts,
// over HTTP as a rollout reaches the model, with each signal left out as
// the control.
func TestSimReadsHarnessSignals(t *testing.T) {
	s, err := sim.Start(t.Context(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := llm.NewClient("agent", llm.RoleConfig{BaseURL: s.URL(), Model: "sim", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	object := []byte(`{"type":"object"}`)
	tools := []llm.Tool{{Name: "search", Parameters: object}, {Name: "answer", Parameters: object}, {Name: "finish", Parameters: object}}
	task := llm.Message{Role: "user", Content: "Answer all 2 questions below.\nQ1: What is the capital of Veloria?\nQ2: What is the founder of Ostrava Mills?"}
	fact := llm.Message{Role: "tool", Content: "The capital of Veloria is Marnth."}
	spent := llm.Message{Role: "tool", Content: "error: " + env.SearchBudgetSpent + " (2 searches); answer from what you have found."}
	for _, tc := range []struct {
		name string
		msgs []llm.Message
		want string // tool name, then a prefix of its arguments
	}{
		{"last step: submits what it has", []llm.Message{task, fact, {Role: "user", Content: rollout.LastStepNotice}}, `finish {"answers":["Marnth",""]}`},
		{"no notice: answers the fact it sees", []llm.Message{task, fact}, `answer {"question":1,"answer":"Marnth"}`},
		{"budget spent: gives up on the question", []llm.Message{task, spent}, `answer {"question":1,"answer":"unknown"}`},
		{"budget left: searches", []llm.Message{task}, `search {"query":"What is the capital of Veloria?"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Complete(t.Context(), llm.Request{Purpose: llm.PurposeAgent, Messages: tc.msgs, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if calls := resp.Message.ToolCalls; len(calls) == 1 {
				got = calls[0].Name + " " + calls[0].Arguments
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("the embedded model called %q, want %q", got, tc.want)
			}
		})
	}
}
