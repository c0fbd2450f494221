package rollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
)

// searcher searches each question of its qa task once, in order, then
// answers: the demo's baseline agent in miniature, with the bundled corpus'
// passages as observations (most of a demo run's bytes).
type searcher struct{}

func (searcher) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	var questions []string
	for _, line := range strings.Split(req.Messages[1].Content, "\n") {
		if q, ok := strings.CutPrefix(line, fmt.Sprintf("Q%d: ", len(questions)+1)); ok {
			questions = append(questions, q)
		}
	}
	asked := 0
	for _, m := range req.Messages {
		asked += len(m.ToolCalls)
	}
	call := llm.ToolCall{ID: fmt.Sprintf("call_%d", asked), Name: "finish", Arguments: `{"answers":[]}`}
	if asked < len(questions) {
		args, _ := json.Marshal(map[string]string{"query": questions[asked]})
		call.Name, call.Arguments = "search", string(args)
	}
	return llm.Response{
		Message: llm.Message{Role: "assistant", Content: "Looking it up.", ToolCalls: []llm.ToolCall{call}},
		Usage:   llm.Usage{PromptTokens: 100 * len(req.Messages), CompletionTokens: 10},
	}, nil
}

// TestRecordBytesPerStep pins what a demo run's size rests on: the bytes a
// record takes per step on qa trajectories, packed (format 3) against what
// the text table alone (format 2) took. Records repeat the corpus'
// passages across steps and tasks; a regression that stores them
// unpacked again takes several times the bytes and fails here.
func TestRecordBytesPerStep(t *testing.T) {
	qa, err := env.NewQA(env.QAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := qa.Tasks("train")
	if err != nil {
		t.Fatal(err)
	}
	tok := testTokenizer(t)
	s, err := compress.New(compress.None, nil, compress.Deps{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Env: qa, Model: searcher{}, Tokenizer: tok, StepLimit: 30, Strategy: s}
	var packed, plain, steps int
	for _, task := range tasks[:8] {
		tr, err := a.Run(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		line, err := EncodeTrajectory(tr)
		if err != nil {
			t.Fatal(err)
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		body, err := unpack(r.Packed)
		if err != nil {
			t.Fatal(err)
		}
		packed += len(line) + 1
		plain += len(line) + 1 - base64.StdEncoding.EncodedLen(len(r.Packed)) + len(body)
		steps += tr.Metrics.Steps
	}
	if steps < 8*5 {
		t.Fatalf("%d steps over 8 tasks: the agent did not search", steps)
	}
	perStep, ratio := packed/steps, float64(packed)/float64(plain)
	t.Logf("%d steps: %d bytes per step packed, %d unpacked (x%.2f)", steps, perStep, plain/steps, ratio)
	// Measured at 1139 bytes per step, x0.38; unpacked records fail both.
	if perStep > 1400 || ratio > 0.5 {
		t.Fatalf("records take %d bytes per step, x%.2f of the unpacked records; want at most 1400 and x0.5", perStep, ratio)
	}
}
