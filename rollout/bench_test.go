package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/cputime"
	"github.com/ctxopt/ctxopt/llm"
)

// BenchmarkCounterIncremental keeps a 5,000-step history counted the way the
// agent loop does: each step adds an action and a ~600-token observation.
// The figure is the cost of one step (target: < 1 ms).
func BenchmarkCounterIncremental(b *testing.B) {
	tok := testTokenizer(b)
	const steps = 5000
	obs := make([]llm.Message, steps)
	act := make([]llm.Message, steps)
	for i := range steps {
		act[i] = llm.Message{Role: "assistant", Content: fmt.Sprintf("Looking up Q%d, try 1.", i%8+1),
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprint(i), Name: "search", Arguments: fmt.Sprintf(`{"query":"What is the capital of place %d?"}`, i)}}}
		obs[i] = llm.Message{Role: "tool", Content: fmt.Sprintf("[1] (doc d%05d) Place %d\n%s", i, i, strings.Repeat(fmt.Sprintf("The river of place %d runs north past old towns. ", i), 50))}
	}
	b.ResetTimer()
	for range b.N {
		c := NewCounter(tok)
		for i := range steps {
			c.Add(act[i])
			c.Add(obs[i])
		}
		if c.Total() == 0 {
			b.Fatal("nothing counted")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*steps), "ms/step")
}

// stepModel answers at once without reading its input, so a run measures
// the agent loop's own work.
type stepModel struct{}

func (stepModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	id := fmt.Sprint(len(req.Messages))
	return llm.Response{Message: llm.Message{Role: "assistant", Content: "next", ToolCalls: []llm.ToolCall{{ID: id, Name: "search", Arguments: `{"query":"q` + id + `"}`}}}}, nil
}

// BenchmarkStepOverhead runs the agent loop for H steps with an instant
// model and environment and prints the non-LLM cost per step; flat
// overhead means the figure does not grow with H.
func BenchmarkStepOverhead(b *testing.B) {
	tok := testTokenizer(b)
	for _, name := range []compress.Name{compress.None, compress.FIFO} {
		s, err := compress.New(name, nil, compress.Deps{Tokenizer: tok})
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range []int{250, 1000, 4000} {
			b.Run(fmt.Sprintf("%s/history=%d", name, h), func(b *testing.B) {
				a := &Agent{Env: fakeEnv{obsWords: 40}, Model: stepModel{}, Tokenizer: tok, StepLimit: h, Strategy: s}
				// One run first, so the tokenizer's memo is warm for every
				// history length alike (the first size measured paid for it).
				if _, err := a.Run(context.Background(), testTask()); err != nil {
					b.Fatal(err)
				}
				cpu0, _ := cputime.Process()
				for b.Loop() {
					if _, err := a.Run(context.Background(), testTask()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*h), "µs/step")
				// CPU time, every thread's (the collector's too): on a busy
				// machine wall time grows with the run's length, this does not.
				if cpu1, ok := cputime.Process(); ok {
					b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N*h), "cpu-µs/step")
				}
			})
		}
	}
}
