package compress

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/llm"
)

func TestPACESelectFollowsEquation7(t *testing.T) {
	p := paceDefaults() // (0.4, 0.8, 1.5), λ = 0.5
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
			p := paceDefaults()
			p.Lambda = lambda
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
		p0 := paceDefaults()
		p0.Lambda = 0
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
	w := weights([]float64{0.9, 0.5, 0.5, 0.1}, 0.3)
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
	s, err := New(PACE, nil, Deps{Tokenizer: testTokenizer(t), Compressor: sum, Embedder: emb})
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
	s, err := New(PACE, nil, Deps{Tokenizer: testTokenizer(t), Compressor: &summaryFake{}, Embedder: &bowEmbedder{}})
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
	off := paceDefaults()
	off.Glimpse = false
	s, err = New(PACE, &off, Deps{Tokenizer: testTokenizer(t), Compressor: &summaryFake{}, Embedder: &bowEmbedder{}})
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

// TestPACEFloat32ScoringChoosesAsFloat64 checks the precision the scorer
// works at (unit keys cached as float32, one float32 matrix-vector product)
// against cosines of the embedder's vectors computed in float64. A float32
// dot product of unit vectors is off by at most about d·2⁻²⁴ (6e-5 at 1,024
// floats) and in practice by about √d·2⁻²⁴; the test holds every score to
// scoreTol, which moves a relative weight by a factor within
// exp(±2·scoreTol/τ) (1 ± 7e-6 at τ = 0.3), so eq. 7 could pick another
// level only for a weight that close to a threshold: on these histories it
// picks the same level for every chunk. fit then lowers the same chunks as
// in float64, except among chunks whose float64 weights are exactly equal
// (the hashed bag of words counts words, so the benchmark's history has
// many such ties): float32 rounding, which depends on where a chunk's words
// fall in the vector, orders the members of a tie, and fit may lower other
// members of it, but not how many. The test checks that every difference
// lies in such a tie and that each tie has as many chunks at each level as
// in float64.
func TestPACEFloat32ScoringChoosesAsFloat64(t *testing.T) {
	const scoreTol = 1e-6
	p := paceDefaults()
	c := &pace{p: p}
	tests := []scoringCase{
		randomScoringCase(5000, 1024),
		benchScoringCase(t, 5000, 256),
		benchScoringCase(t, 5000, 1024),
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, d := len(tc.keys), len(tc.query)
			st := &paceState{dim: d}
			cos := make([]float64, m)
			for i, k := range tc.keys {
				st.keys = appendUnit(st.keys, k)
				cos[i] = cosine64(k, tc.query)
			}
			w64 := weights(cos, p.Tau)
			ties := map[float64][]int{} // the chunks of each float64 weight
			for i, w := range w64 {
				ties[w] = append(ties[w], i)
			}
			old := make([]*chunk, m)
			for i := range old {
				// Tied chunks cost what the tie's first costs, so that which
				// of them fit lowers cannot change how many it lowers.
				n := tc.tokens[ties[w64[i]][0]]
				old[i] = &chunk{step: i + 1, fullTok: n, detTok: n / 2, brTok: n / 5, phTok: 6, sum: &paceSummary{}}
			}
			for _, pressure := range []float64{0, 0.5, 1} {
				c.selectLevels(st, m, normalize(tc.query), pressure)
				for i, s := range st.scores {
					if diff := math.Abs(float64(s) - cos[i]); diff > scoreTol {
						t.Fatalf("chunk %d: float32 score %v, float64 cosine %v: off by %.2g, more than %g", i+1, s, cos[i], diff, scoreTol)
					}
				}
				th := p.thresholds(pressure)
				want := &paceState{weights: w64, levels: make([]level, m)}
				for i, w := range w64 {
					want.levels[i] = th.of(w)
				}
				for i := range old {
					if st.levels[i] != want.levels[i] {
						t.Fatalf("P=%v: chunk %d is %s, %s in float64 (weight %v)", pressure, i+1, levelNames[st.levels[i]], levelNames[want.levels[i]], w64[i])
					}
				}
				total := 0
				for i, ch := range old {
					total += ch.tokensAt(want.levels[i]) + paceLineTokens
				}
				for _, share := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9} {
					got := &paceState{weights: st.weights, levels: slices.Clone(st.levels)}
					ref := &paceState{weights: w64, levels: slices.Clone(want.levels)}
					budget := int(share * float64(total))
					for _, s := range []*paceState{got, ref} {
						if err := c.fit(context.Background(), s, old, total, budget, &Event{}); err != nil {
							t.Fatal(err)
						}
					}
					differ, tied := 0, 0
					for i := range old {
						if got.levels[i] == ref.levels[i] {
							continue
						}
						differ++
						if len(ties[w64[i]]) < 2 {
							t.Fatalf("P=%v, budget %.0f%%: fit made chunk %d %s, %s in float64, and no other chunk has its float64 weight %v", pressure, 100*share, i+1, levelNames[got.levels[i]], levelNames[ref.levels[i]], w64[i])
						}
					}
					for w, members := range ties {
						if len(members) < 2 {
							continue
						}
						tied += len(members)
						var nGot, nRef [len(levelNames)]int
						for _, i := range members {
							nGot[got.levels[i]]++
							nRef[ref.levels[i]]++
						}
						if nGot != nRef {
							t.Fatalf("P=%v, budget %.0f%%: the %d chunks of float64 weight %v (chunk %d first) are %v at each level, %v in float64", pressure, 100*share, len(members), w, members[0]+1, nGot, nRef)
						}
					}
					if differ > 0 {
						t.Logf("P=%v, budget %.0f%%: %d chunks differ after fit, all swapped within exact float64 ties (%d of %d chunks tied, %d distinct weights)", pressure, 100*share, differ, tied, m, len(ties))
					}
				}
			}
		})
	}
}

type scoringCase struct {
	name   string
	keys   [][]float32
	query  []float32
	tokens []int // each chunk's full tokens
}

// randomScoringCase draws m keys of d floats that lean towards the query
// by a uniform share, so the weights spread over every level.
func randomScoringCase(m, d int) scoringCase {
	r := rand.New(rand.NewPCG(7, 8))
	tc := scoringCase{name: fmt.Sprintf("random keys, %d floats", d), query: make([]float32, d)}
	for j := range tc.query {
		tc.query[j] = float32(r.NormFloat64())
	}
	for range m {
		a, k := r.Float64(), make([]float32, d)
		for j := range k {
			k[j] = float32(a*float64(tc.query[j]) + r.NormFloat64())
		}
		tc.keys = append(tc.keys, k)
		tc.tokens = append(tc.tokens, 20+r.IntN(100))
	}
	return tc
}

// benchScoringCase embeds the chunks of BenchmarkPACEBuilder's history
// and its query (the task and the last two chunks) with the hashed bag of
// words.
func benchScoringCase(t *testing.T, n, d int) scoringCase {
	h := benchHistory(n)
	var texts []string
	for _, tr := range turnsOf(h, 1) {
		texts = append(texts, FormatHistory(h[tr.Start:tr.End], tr.Step))
	}
	texts = append(texts, fixtureTask+"\n"+texts[n-2]+"\n"+texts[n-1])
	vecs, _, err := (&bowEmbedder{dims: d}).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	tc := scoringCase{name: fmt.Sprintf("benchmark history, %d floats", d), keys: vecs[:n-2], query: vecs[n]}
	for _, s := range texts[:n-2] {
		tc.tokens = append(tc.tokens, len(s)/4)
	}
	return tc
}

// cosine64 is the cosine of a and b computed in float64.
func cosine64(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// paceDefaults are PACE's registered defaults.
func paceDefaults() PACEParams { return *defaultPACE().(*PACEParams) }

// weights returns the relative weights w̃_i = M·softmax(s/τ)_i of eq. 5 for
// cosine scores s.
func weights(scores []float64, tau float64) []float64 {
	out := append([]float64(nil), scores...)
	relativeWeights(out, slices.Max(out), tau)
	return out
}
