package compress

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/cputime"

	"github.com/ctxopt/ctxopt/llm"
)

// BenchmarkPACEBuilder scores and assembles a 5,000-chunk history, keys
// and summaries cached (they are made once per chunk), and prints the cost
// of one step (target: ≤ 1 ms), for key vectors of 64 floats (this
// benchmark's first size), the embedded model's 256 and BGE-M3's 1024 (the
// paper's encoder: scoring is then 5M multiply-adds a step, more than
// scalar Go does in 1 ms).
func BenchmarkPACEBuilder(b *testing.B) {
	for _, dims := range []int{64, 256, 1024} {
		b.Run(fmt.Sprintf("dims=%d", dims), func(b *testing.B) { benchmarkPACEBuilder(b, dims) })
	}
}

func benchmarkPACEBuilder(b *testing.B, dims int) {
	const chunks = 5000
	tok := testTokenizer(b)
	h := benchHistory(chunks)
	s, err := New(PACE, nil, Deps{Tokenizer: tok, Compressor: &summaryFake{}, Embedder: &bowEmbedder{dims: dims}})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Step: chunks, MaxSteps: 2 * chunks, Task: fixtureTask, History: h, ContextTokens: 20000, Window: 128000}
	out, err := s.History.CompressHistory(context.Background(), in) // makes the keys and summaries
	if err != nil {
		b.Fatal(err)
	}
	in.State = out.State
	cpu0, _ := cputime.Process()
	for b.Loop() {
		if _, err := s.History.CompressHistory(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/step")
	// CPU time, every thread's: the figure a busy machine inflates least.
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/step")
	}
}

// BenchmarkPACEScore times the scorer alone on 5,000 cached keys (the
// matrix-vector product and eqs. 5–7, the part of a builder step that grows
// with the key size) and prints the key bytes it reads per CPU second: at 1,024
// floats a step reads 20 MB, and that read, not the arithmetic, sets its
// floor.
func BenchmarkPACEScore(b *testing.B) {
	const chunks = 5000
	for _, dims := range []int{64, 256, 1024} {
		b.Run(fmt.Sprintf("dims=%d", dims), func(b *testing.B) {
			tc := randomScoringCase(chunks, dims)
			st := &paceState{dim: dims}
			for _, k := range tc.keys {
				st.keys = appendUnit(st.keys, k)
			}
			q := normalize(tc.query)
			c := &pace{p: paceDefaults()}
			cpu0, _ := cputime.Process()
			for b.Loop() {
				c.selectLevels(st, chunks, q, 0.5)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/step")
			// The bytes per CPU second: a busy machine takes the CPU away
			// between steps, which wall time would count.
			if cpu1, ok := cputime.Process(); ok {
				cpu := (cpu1 - cpu0).Seconds() / float64(b.N)
				b.ReportMetric(cpu*1000, "cpu-ms/step")
				b.ReportMetric(float64(len(st.keys)*4)/cpu/1e9, "GB/cpu-s")
			}
		})
	}
}

// benchHistory is the benchmark's history: n search turns, one chunk each.
func benchHistory(n int) []llm.Message {
	var h []llm.Message
	for i := range n {
		id := fmt.Sprint(i)
		h = append(h,
			llm.Message{Role: "assistant", Content: "Looking up.", ToolCalls: []llm.ToolCall{{ID: id, Name: "search", Arguments: fmt.Sprintf(`{"query":"capital of place %d"}`, i)}}},
			llm.Message{Role: "tool", ToolCallID: id, Content: fmt.Sprintf("[1] (doc d%05d) Place %d\nThe capital of Place %d is Town %d. %s", i, i, i, i, strings.Repeat("Old roads run north. ", 8))})
	}
	return h
}
