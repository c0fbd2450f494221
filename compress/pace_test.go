package compress

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/llm"
)

func TestPACESelectFollowsEquation7(t *testing.T) {
	p := Params{}.WithDefaults().PACE // (0.4, 0.8, 1.5), λ = 0.5
	tests := []struct {
		w, pressure float64
		want        string
	}{
		// P = 0: thresholds are the base ones.
		{2.0, 0, LevelFull},
		{1.5, 0, LevelDetailed}, // w = γ is not above γ
		{1.0, 0, LevelDetailed},
		{0.8, 0, LevelBrief},
		{0.5, 0, LevelBrief},
		{0.4, 0, LevelPlaceholder},
		{0.1, 0, LevelPlaceholder},
		// P = 1: thresholds ×1.5 = (0.6, 1.2, 2.25).
		{2.0, 1, LevelDetailed},
		{2.3, 1, LevelFull},
		{1.0, 1, LevelBrief},
		{0.5, 1, LevelPlaceholder},
		// P = 0.5: ×1.25 = (0.5, 1.0, 1.875).
		{1.9, 0.5, LevelFull},
		{1.8, 0.5, LevelDetailed},
		{0.9, 0.5, LevelBrief},
		{0.45, 0.5, LevelPlaceholder},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("w=%v,P=%v", tc.w, tc.pressure), func(t *testing.T) {
			if got := p.Select(tc.w, tc.pressure); got != tc.want {
				t.Fatalf("Select = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPACERaisingLambdaCoarsens(t *testing.T) {
	rank := map[string]int{LevelFull: 0, LevelDetailed: 1, LevelBrief: 2, LevelPlaceholder: 3}
	ws := []float64{0.3, 0.45, 0.7, 0.85, 1.1, 1.4, 1.6, 1.9, 2.4, 3}
	for _, pressure := range []float64{0.2, 0.6, 1} {
		var prev []string
		for _, lambda := range []float64{0, 0.25, 0.5, 1, 2} {
			p := Params{PACE: PACEParams{Lambda: &lambda}}.WithDefaults().PACE
			var cur []string
			for i, w := range ws {
				lv := p.Select(w, pressure)
				if prev != nil && rank[lv] < rank[prev[i]] {
					t.Fatalf("P=%v: raising λ to %v moved w=%v from %s to finer %s", pressure, lambda, w, prev[i], lv)
				}
				cur = append(cur, lv)
			}
			prev = cur
		}
		// From λ=0 to λ=2 at least one chunk moved.
		l0 := 0.0
		p0 := Params{PACE: PACEParams{Lambda: &l0}}.WithDefaults().PACE
		moved := 0
		for i, w := range ws {
			if p0.Select(w, pressure) != prev[i] {
				moved++
			}
		}
		if moved == 0 {
			t.Fatalf("P=%v: λ from 0 to 2 moved no chunk", pressure)
		}
	}
}

func TestPACEWeightsAndPressure(t *testing.T) {
	w := Weights([]float64{0.9, 0.5, 0.5, 0.1}, 0.3)
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	// Relative weights average 1 (they sum to M).
	if math.Abs(sum-4) > 1e-9 || w[0] <= 1 || w[3] >= w[2] || w[1] != w[2] {
		t.Fatalf("weights %v", w)
	}
	want := math.Exp(0.9/0.3) / (math.Exp(0.9/0.3) + 2*math.Exp(0.5/0.3) + math.Exp(0.1/0.3)) * 4
	if math.Abs(w[0]-want) > 1e-9 {
		t.Fatalf("w0 = %v, want %v", w[0], want)
	}
	for _, tc := range []struct {
		t, tMax, c, b int
		want          float64
	}{
		{10, 100, 0, 1000, 0.1}, {10, 100, 500, 1000, 0.5}, {200, 100, 0, 1000, 1}, {1, 0, 250, 1000, 0.25},
	} {
		if got := Pressure(tc.t, tc.tMax, tc.c, tc.b); math.Abs(got-tc.want) > 1e-12 {
			t.Fatalf("Pressure(%v) = %v, want %v", tc, got, tc.want)
		}
	}
}

// bowEmbedder is a hashed bag of words, like the embedded model's.
type bowEmbedder struct {
	calls int
	// dims is the vector size (0: 64).
	dims int
}

func (e *bowEmbedder) Embed(_ context.Context, texts []string) ([][]float32, llm.Usage, error) {
	e.calls++
	out := make([][]float32, len(texts))
	for i, s := range texts {
		d := cmp.Or(e.dims, 64)
		v := make([]float32, d)
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%uint32(d)]++
		}
		out[i] = v
	}
	return out, llm.Usage{}, nil
}

// summaryFake answers PACE summary prompts with the step's first result
// line as DETAILED and its action as BRIEF.
type summaryFake struct{ calls int }

func (f *summaryFake) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	f.calls++
	p := req.Messages[0].Content
	action, result := "", ""
	for _, l := range strings.Split(p, "\n") {
		switch {
		case strings.HasPrefix(l, "action: "):
			action = l
		case strings.HasPrefix(l, "The ") && result == "":
			result = l
		}
	}
	return llm.Response{Message: llm.Message{Content: "DETAILED: " + result + "\nBRIEF: " + action}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5}}, nil
}

func TestPACEBuildsTheContext(t *testing.T) {
	emb, sum := &bowEmbedder{}, &summaryFake{}
	s, err := New(PACE, Params{}, Deps{Tokenizer: testTokenizer(t), Compressor: sum, Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	in := fixtureInput()
	in.ContextTokens, in.Window = 500, 4000
	out, err := s.History.CompressHistory(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, out.Messages)
	golden.Check(t, "pace.golden", dump(Output{Messages: out.Messages, Event: out.Event}))
	// The last N = 2 chunks are whole messages after the chunk text.
	if n := len(turnStarts(out.Messages)); n != 2 {
		t.Fatalf("%d turns kept as messages, want 2", n)
	}
	// Every older chunk is there at some level; the levels follow eq. 7
	// for the weights the scorer gave.
	text := out.Messages[1].Content
	for step := 1; step <= 4; step++ {
		if !strings.Contains(text, fmt.Sprintf("[chunk %d | ", step)) {
			t.Fatalf("chunk %d missing:\n%s", step, text)
		}
	}
	// The next step embeds the query only: keys are cached per chunk, and
	// summaries are not asked again.
	embCalls, sumCalls := emb.calls, sum.calls
	in.State = out.State
	again, err := s.History.CompressHistory(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if emb.calls != embCalls+1 || sum.calls != sumCalls || again.Event.Calls != 0 {
		t.Fatalf("second step: %d embed calls (want 1), %d summary calls (want 0)", emb.calls-embCalls, sum.calls-sumCalls)
	}
}

func TestPACEGlimpse(t *testing.T) {
	s, err := New(PACE, Params{}, Deps{Tokenizer: testTokenizer(t), Compressor: &summaryFake{}, Embedder: &bowEmbedder{}})
	if err != nil {
		t.Fatal(err)
	}
	in := fixtureInput()
	if s.Tools == nil || s.Tools.Tools()[0].Name != GlimpseTool {
		t.Fatal("no glimpse tool")
	}
	got := s.Tools.CallTool(context.Background(), in, llm.ToolCall{Name: GlimpseTool, Arguments: `{"chunks":[1,4]}`})
	if !strings.Contains(got, `<step n="1">`) || !strings.Contains(got, "Ilse Varga") || strings.Contains(got, `<step n="2">`) {
		t.Fatalf("glimpse 1,4 = %q", got)
	}
	for args, want := range map[string]string{
		`{"chunks":[1,2,3,4]}`: "at most 3 chunks",
		`{"chunks":[9]}`:       "no chunk 9",
		`{"chunks":"x"}`:       "error: glimpse takes",
	} {
		if got := s.Tools.CallTool(context.Background(), in, llm.ToolCall{Name: GlimpseTool, Arguments: args}); !strings.Contains(got, want) {
			t.Fatalf("glimpse %s = %q, want %q", args, got, want)
		}
	}
	// A glimpse of a glimpse shows the chunks the first one showed, once.
	n := len(turnsOf(in.History, 1))
	first := s.Tools.CallTool(context.Background(), in, llm.ToolCall{Name: GlimpseTool, Arguments: `{"chunks":[1]}`})
	in.History = append(in.History,
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "g1", Name: GlimpseTool, Arguments: `{"chunks":[1]}`}}},
		llm.Message{Role: "tool", ToolCallID: "g1", Name: GlimpseTool, Content: first})
	again := s.Tools.CallTool(context.Background(), in, llm.ToolCall{Name: GlimpseTool, Arguments: fmt.Sprintf(`{"chunks":[%d,1]}`, n+1)})
	if again != first {
		t.Fatalf("glimpse of glimpse chunk %d = %q, want chunk 1 alone: %q", n+1, again, first)
	}
	off := false
	s, err = New(PACE, Params{PACE: PACEParams{Glimpse: &off}}, Deps{Tokenizer: testTokenizer(t), Compressor: &summaryFake{}, Embedder: &bowEmbedder{}})
	if err != nil || s.Tools != nil {
		t.Fatalf("glimpse disabled: tools %v, err %v", s.Tools, err)
	}
}

func TestSortHigh32IsStableByWeight(t *testing.T) {
	keys := []uint64{3<<32 + 0, 1<<32 + 1, 3<<32 + 2, 0x7f000000<<32 + 3, 1<<32 + 4, 0<<32 + 5, 0x100<<32 + 6}
	want := slices.Clone(keys)
	slices.Sort(want) // the index in the low bits makes equal weights keep their order
	sortHigh32(keys, nil)
	if !slices.Equal(keys, want) {
		t.Fatalf("sorted %x, want %x", keys, want)
	}
}
