package sim

import (
	"encoding/json"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
)

func TestAgentReply(t *testing.T) {
	summary := func(lines string) string { return taskText + "\n\nSummary of your earlier steps:\n" + lines }
	tests := []struct {
		name        string
		msgs        []llm.Message
		wantTool    string
		wantQuery   string
		wantAnswers []string
		wantThought string
	}{
		{
			name:        "first question first; the system prompt is not context",
			msgs:        agentMsgs(taskText),
			wantTool:    "search",
			wantQuery:   "What is the capital of Veloria?",
			wantThought: "Looking up Q1, try 1.",
		},
		{
			name:        "forms 1 and 2 are read, form 3 is not",
			msgs:        agentMsgs(taskText, [2]string{"What is the capital of Veloria?", obsVeloria}, [2]string{"What is the founding year of Ostrel?", obsOstrel}),
			wantTool:    "search",
			wantQuery:   "Ostrel founding year",
			wantThought: "Looking up Q3, try 2.",
		},
		{
			name: "third attempt is the bare entity",
			msgs: agentMsgs(taskText, [2]string{"What is the capital of Veloria?", obsVeloria},
				[2]string{"What is the founding year of Ostrel?", obsOstrel}, [2]string{"Ostrel founding year", obsOstrel}),
			wantTool:  "search",
			wantQuery: "Ostrel",
		},
		{
			name: "summary query lines count as attempts",
			msgs: agentMsgs(summary("COMPLETED:\n- Identified the capital of Veloria: Marnth.\n- Identified the chief export of Port Anselm: Dorvik amber.\n" +
				"ATTEMPTED QUERIES:\n- \"What is the founding year of Ostrel?\"\n- \"Ostrel founding year\"\n")),
			wantTool:    "search",
			wantQuery:   "Ostrel",
			wantThought: "Looking up Q3, try 3.",
		},
		{
			name: "finishes with answers from fact-cache lines",
			msgs: agentMsgs(summary("FACT CACHE:\n- Q1: The capital of Veloria is Marnth.\n- Q2: Port Anselm's chief export is Dorvik amber.\n" +
				"- founding year of Ostrel -> 1742\n- longest river of Ostrel = Tamsa River\n")),
			wantTool:    "finish",
			wantAnswers: []string{"Marnth", "Dorvik amber", "1742", "Tamsa River"},
		},
		{
			name: "form 3 in a summary stays unreadable",
			msgs: agentMsgs(summary("FACT CACHE:\n- Q1: The capital of Veloria is Marnth.\n- Q2: Port Anselm's chief export is Dorvik amber.\n" +
				"REASONING: 1742 is listed in the archives of Ostrel under founding year.\n")),
			wantTool:  "search",
			wantQuery: "What is the founding year of Ostrel?",
		},
		{
			name: "a fact-cache line it cannot read closes the question",
			msgs: agentMsgs(summary("FACT CACHE:\n- Q1: The capital of Veloria is Marnth.\n- Q2: Port Anselm's chief export is Dorvik amber.\n" +
				"- Q3: 1742 is listed in the archives of Ostrel under founding year.\n")),
			wantTool:  "search",
			wantQuery: "What is the longest river of Ostrel?",
		},
		{
			name:      "a pending line does not close the question",
			msgs:      agentMsgs(summary("FACT CACHE:\n- Q1: The capital of Veloria is Marnth.\nPENDING:\n- Q2: What is the chief export of Port Anselm?\n")),
			wantTool:  "search",
			wantQuery: "What is the chief export of Port Anselm?",
		},
		{
			name:      "a longer entity name does not answer",
			msgs:      agentMsgs(summary("- Veloria Minor's capital is Glimmer.\n- capital of Veloria Minor: Tarn.\n- The capital of Veloria Minor is Tarn.\n")),
			wantTool:  "search",
			wantQuery: "What is the capital of Veloria?",
		},
		{
			name: "the first statement in the context wins",
			msgs: agentMsgs(summary("- capital of Veloria: Marnth.\n- Q2: Port Anselm's chief export is Dorvik amber.\n- The founding year of Ostrel is 1742.\n"+
				"- longest river of Ostrel: Tamsa River\n"), [2]string{"Veloria", "The capital of Veloria is Elsewhere."}),
			wantTool:    "finish",
			wantAnswers: []string{"Marnth", "Dorvik amber", "1742", "Tamsa River"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := agentReply(tt.msgs)
			if got.Call.Name != tt.wantTool {
				t.Fatalf("tool = %s(%s), want %s", got.Call.Name, got.Call.Args, tt.wantTool)
			}
			if tt.wantThought != "" && got.Thought != tt.wantThought {
				t.Errorf("thought = %q, want %q", got.Thought, tt.wantThought)
			}
			switch got.Call.Name {
			case "search":
				if tt.wantQuery == "" {
					return
				}
				if q := searchQuery(got.Call.Args); q != tt.wantQuery {
					t.Errorf("query = %q, want %q", q, tt.wantQuery)
				}
			case "finish":
				var v struct{ Answers []string }
				if err := json.Unmarshal([]byte(got.Call.Args), &v); err != nil {
					t.Fatal(err)
				}
				if len(v.Answers) != len(tt.wantAnswers) {
					t.Fatalf("answers = %q, want %q", v.Answers, tt.wantAnswers)
				}
				for i := range v.Answers {
					if v.Answers[i] != tt.wantAnswers[i] {
						t.Errorf("answer %d = %q, want %q", i+1, v.Answers[i], tt.wantAnswers[i])
					}
				}
			}
		})
	}
}

// TestAgentGivesUp follows Q3 (form 3 only) and Q4 (never found) to the end.
func TestAgentGivesUp(t *testing.T) {
	msgs := agentMsgs(taskText,
		[2]string{"What is the capital of Veloria?", obsVeloria},
		[2]string{"What is the founding year of Ostrel?", obsOstrel},
		[2]string{"Ostrel founding year", obsOstrel},
		[2]string{"Ostrel", obsOstrel})
	got := agentReply(msgs)
	if got.Call.Name != "finish" {
		t.Fatalf("after three Ostrel searches got %s(%s), want finish", got.Call.Name, got.Call.Args)
	}
	want := `{"answers":["Marnth","Dorvik amber","unknown","unknown"]}`
	if got.Call.Args != want {
		t.Errorf("args = %s, want %s", got.Call.Args, want)
	}
}

func TestAgentSkipsVisibleQuery(t *testing.T) {
	// Attempt 1 would be "Ostrel founding year", already visible in the
	// summary, so the next candidate not yet issued is used.
	user := taskText + "\n\nSummary:\nCOMPLETED:\n- Identified the capital of Veloria: Marnth.\n- Identified the chief export of Port Anselm: Dorvik amber.\n" +
		"ATTEMPTED QUERIES:\n- \"Ostrel founding year\"\n"
	got := agentReply(agentMsgs(user))
	if q := searchQuery(got.Call.Args); q != "Ostrel" {
		t.Errorf("query = %q, want %q", q, "Ostrel")
	}
}
