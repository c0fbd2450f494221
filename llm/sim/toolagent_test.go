package sim

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// lastNotice is rollout.LastStepNotice (llm/sim cannot import rollout).
const lastNotice = "Step limit: this is your last action. Submit your final answer now with what you have found; nothing after it will run."

func TestToolAgent(t *testing.T) {
	task := llm.Message{Role: "user", Content: "Answer all 2 questions below.\nQ1: What is the capital of Veloria?\nQ2: What is the founder of Ostrava Mills?"}
	answer := []llm.Tool{{Name: "search"}, {Name: "finish"}, {Name: "answer"}}
	both := append(answer, llm.Tool{Name: "glimpse"})
	chunks := llm.Message{Role: "user", Content: "Earlier steps.\n[chunk 1 | placeholder] step 1: search({\"query\":\"Ostrava Mills\"}); result hidden\n[chunk 2 | brief] Step 2 searched \"weather\". The results were about Marnth."}
	tests := []struct {
		name  string
		msgs  []llm.Message
		tools []llm.Tool
		want  string // tool(args prefix)
	}{
		{"searches the first question", []llm.Message{task}, answer, `search({"query":"What is the capital of Veloria?"}`},
		{"answers a visible fact", []llm.Message{task, {Role: "tool", Content: "The capital of Veloria is Marnth."}}, answer, `answer({"question":1,"answer":"Marnth"}`},
		{"goes where the environment says", []llm.Message{task, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, answer, `search({"query":"What is the founder of Ostrava Mills?"}`},
		{"finishes when every question has an answer", []llm.Message{task, {Role: "tool", Content: "Recorded the answer to Q2. Every question has an answer; call finish."}}, answer, `finish(`},
		{"glimpses a hidden chunk about the entity", []llm.Message{task, chunks, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, both, `glimpse({"chunks":[1]}`},
		{"without glimpse it searches", []llm.Message{task, chunks, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, answer, `search(`},
		{"a glimpsed chunk is not asked for again", []llm.Message{task, chunks, {Role: "assistant", ToolCalls: []llm.ToolCall{{Name: "glimpse", Arguments: `{"chunks":[1]}`}}}, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, both, `search(`},
		{"gives up after searches the context shows", []llm.Message{task, {Role: "user", Content: "[chunk 1 | placeholder] step 1: search({\"query\":\"Veloria\"}); result hidden\n[chunk 2 | placeholder] step 2: search({\"query\":\"Veloria capital\"}); result hidden\n[chunk 3 | placeholder] step 3: search({\"query\":\"What is the capital of Veloria?\"}); result hidden"}}, answer, `answer({"question":1,"answer":"unknown"}`},
		{"glimpses a chunk only for what it hides, not a glimpse of it", []llm.Message{task, {Role: "user", Content: "[chunk 3 | brief] Step 3 called glimpse. The results were about Ostrava Mills.\n[chunk 4 | placeholder] step 4: glimpse({\"chunks\":[1]}) Ostrava Mills; result hidden"}, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, both, `search(`},
		// The environment's search budget: a spent budget ends the searching,
		// not the glimpsing.
		{"gives up when the search budget is spent", []llm.Message{task, {Role: "tool", Content: "error: the search budget of this task is spent (2 searches); answer from what you have found."}}, answer, `answer({"question":1,"answer":"unknown"}`},
		{"still glimpses when the search budget is spent", []llm.Message{task, chunks, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}, {Role: "tool", Content: "error: the search budget of this task is spent (2 searches); answer from what you have found."}}, both, `glimpse({"chunks":[1]}`},
		// The rollout's last-step notice: submit what the context shows.
		{"submits what it has at the last step", []llm.Message{task, {Role: "tool", Content: "The capital of Veloria is Marnth."}, {Role: "user", Content: lastNotice}}, both, `finish({"answers":["Marnth",""]}`},
		{"submits what it has at the last step without the answer tool", []llm.Message{task, {Role: "tool", Content: "The capital of Veloria is Marnth."}, chunks, {Role: "user", Content: lastNotice}}, []llm.Tool{{Name: "search"}, {Name: "finish"}, {Name: "glimpse"}}, `finish({"answers":["Marnth","unknown"]}`},
	}
	// A workflow (PAACE-Syn): read the input once, then answer from memory.
	workflow := []llm.Tool{{Name: "read_input"}, {Name: "answer"}, {Name: "finish"}}
	read := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{Name: "read_input", Arguments: "{}"}}}
	tests = append(tests, []struct {
		name  string
		msgs  []llm.Message
		tools []llm.Tool
		want  string
	}{
		{"reads a workflow's input first", []llm.Message{task}, workflow, `read_input({}`},
		{"answers from the input it read", []llm.Message{task, read, {Role: "tool", Content: "Input:\nThe capital of Veloria is Marnth."}}, workflow, `answer({"question":1,"answer":"Marnth"}`},
		{"does not read the input again after a turn", []llm.Message{task, read, {Role: "tool", Content: "Recorded the answer to Q1. Next unanswered: Q2."}}, workflow, `answer({"question":2,"answer":"unknown"}`},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toolAgentReply(tc.msgs, tc.tools)
			s := got.Call.Name + "(" + got.Call.Args
			if !strings.HasPrefix(s, tc.want) {
				t.Fatalf("got %s, want %s…", s, tc.want)
			}
		})
	}
	// Without answer or glimpse tools it is the plain agent.
	plain := []llm.Message{task}
	if a, b := toolAgentReply(plain, []llm.Tool{{Name: "search"}}), agentReply(plain); a != b {
		t.Fatalf("%+v != %+v", a, b)
	}
}

func TestPACESummaryAndEmbedder(t *testing.T) {
	prompt := "Summarize this step.\n\n" + templates.PaceStep + "\n<step n=\"4\">\nthought: x\naction: search({\"query\":\"founder of Ostrava Mills\"})\nobservation:\n[1] (doc d3) Ostrava Mills\nThe founder of Ostrava Mills is Ilse Varga. The mills opened in 1881.\n</step>\n"
	out, ok := extendedCompress(prompt)
	if !ok {
		t.Fatal("not recognised as a PACE summary prompt")
	}
	d, b, _ := strings.Cut(out, "\nBRIEF: ")
	if !strings.Contains(d, "The founder of Ostrava Mills is Ilse Varga.") || strings.Contains(b, "Ilse") || !strings.Contains(b, "Ostrava Mills") {
		t.Fatalf("detailed must keep the fact, brief only the subject:\n%s", out)
	}
	// The embedder's cosine follows word overlap.
	cos := func(a, b string) float64 {
		x, y := embed(a), embed(b)
		var s float64
		for i := range x {
			s += float64(x[i] * y[i])
		}
		return s
	}
	q := "What is the founder of Ostrava Mills?"
	same, other := cos(q, "The founder of Ostrava Mills is Ilse Varga."), cos(q, "Harbours were built along the coast in the middle ages.")
	if same <= other || same < 0.3 {
		t.Fatalf("cosine with an overlapping text %.3f, with a disjoint one %.3f", same, other)
	}
}
