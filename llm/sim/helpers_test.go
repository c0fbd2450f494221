package sim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
)

func mustTokenizer(t testing.TB) *llm.Tokenizer {
	t.Helper()
	tok, err := llm.NewTokenizer("")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The fixture world. Under the lossy rule the compressor drops the capital
// of Veloria and the highest peak of Ostrel and keeps the others (pinned by
// TestLossyFixture).
const (
	taskText = "Answer all 4 questions below. Search for evidence, then call finish with the answers in question order.\n" +
		"Q1: What is the capital of Veloria?\n" +
		"Q2: What is the chief export of Port Anselm?\n" +
		"Q3: What is the founding year of Ostrel?\n" +
		"Q4: What is the longest river of Ostrel?"

	obsVeloria = "[1] (doc d00001) Veloria\n" +
		"Veloria is a small region set among misty hills. The capital of Veloria is Marnth. Veloria's patron is Saint Ivo. The legend of Qwerin is told in villages across Veloria.\n\n" +
		"[2] (doc d00002) Port Anselm\n" +
		"Port Anselm is an old duchy. Port Anselm's chief export is Dorvik amber. The population of Port Anselm is 48210.\n"

	obsOstrel = "[1] (doc d00003) Ostrel\n" +
		"Ostrel is a quiet land of farms. 1742 is listed in the archives of Ostrel under founding year. The highest peak of Ostrel is Mount Kerr.\n"

	obsEmpty = "[1] (doc d00004) Lumen Reach\n" +
		"Lumen Reach lies among rocky cliffs. Bells ring at noon in most towns of Lumen Reach.\n"
)

// agentMsgs builds an agent conversation: system, task, then one search
// turn per query with its observation.
func agentMsgs(user string, turns ...[2]string) []llm.Message {
	msgs := []llm.Message{
		{Role: "system", Content: "You are a research agent. The capital of Veloria is Wrongton."},
		{Role: "user", Content: user},
	}
	for i, tr := range turns {
		args, _ := json.Marshal(map[string]string{"query": tr[0]})
		id := "call_" + string(rune('a'+i))
		msgs = append(msgs,
			llm.Message{Role: "assistant", Content: "Looking up.", ToolCalls: []llm.ToolCall{{ID: id, Name: "search", Arguments: string(args)}}},
			llm.Message{Role: "tool", ToolCallID: id, Name: "search", Content: tr[1]})
	}
	return msgs
}

// stepBlock renders one history step as rollout.FormatHistory does.
func stepBlock(n int, query, obs string) string {
	args, _ := json.Marshal(map[string]string{"query": query})
	return "<step n=\"" + strconv.Itoa(n) + "\">\nthought: Looking up.\naction: search(" + string(args) + ")\nobservation:\n" +
		strings.TrimRight(obs, "\n") + "\n</step>\n"
}

// compressorPrompt renders a history guideline with the fixture task.
func compressorPrompt(guideline, prevSummary, history string) string {
	return guideline + "\n\n[Instruction]\n" + taskText + "\n\n[Previous summary]\n" + prevSummary +
		"\n\n[Turns since the previous summary]\n" + history + "\nReturn only the summary."
}
