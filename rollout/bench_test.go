package rollout

import (
	"fmt"
	"strings"
	"testing"

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
