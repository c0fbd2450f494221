package compress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
)

// Retrieval keeps the task, the last turn and the past turns most relevant
// to the current step (ACON's Retrieval baseline).
const Retrieval Name = "retrieval"

// DefaultRetrievalKeep is ACON D.3's: 4 turns and the last.
const DefaultRetrievalKeep = 4

// RetrievalParams configure retrieval (ACON D.3: 4 turns and the last).
type RetrievalParams struct {
	// Keep is how many past turns are retrieved besides the last one.
	Keep int `yaml:"keep" json:"keep"`
	// Budget caps the tokens of the retrieved turns (0: no cap beyond Keep).
	Budget int `yaml:"budget" json:"budget"`
	// Embeddings scores turns by the embedder role's cosine instead of BM25.
	Embeddings bool `yaml:"embeddings" json:"embeddings"`
}

func (p *RetrievalParams) Validate() error {
	f := fieldErrors{prefix: Section + ".retrieval"}
	f.check(p.Keep > 0, "keep", "must be positive")
	f.check(p.Budget >= 0, "budget", "must not be negative")
	return f.err()
}

func init() {
	Register(Module{
		Name: Retrieval, Rank: 30, Doc: "the task, the last turn and the past turns most relevant to it (BM25 or embeddings)",
		Caps: Caps{Embedder: true},
		Key:  "retrieval", Params: func() ModuleParams { return &RetrievalParams{Keep: DefaultRetrievalKeep} },
		New: newRetrieval,
	})
}

func newRetrieval(mp ModuleParams, d Deps) (*Strategy, error) {
	p := *mp.(*RetrievalParams)
	r := &retrieval{p: p, tok: d.Tokenizer}
	s := &Strategy{History: r, Params: fingerprint(p)}
	if p.Embeddings {
		if d.Embedder == nil {
			return nil, fmt.Errorf("strategy retrieval: compression.retrieval.embeddings needs an embedder (roles.%s)", llm.RoleEmbedder)
		}
		r.emb, s.CallsEmbedder = d.Embedder, true
	}
	return s, nil
}

// retrieval keeps the task, the last turn and the past turns most relevant
// to the current step (ACON's Retrieval baseline: 4 turns and the last),
// ranked by BM25 over the turns, or by the embedder's cosine.
type retrieval struct {
	p   RetrievalParams
	tok *llm.Tokenizer
	emb Embedder // nil: BM25
}

var _ History = (*retrieval)(nil)

// retrievalState keeps each past turn's text, token count and key, so a
// turn is rendered and embedded once.
type retrievalState struct {
	turns []retrievedTurn
}

type retrievedTurn struct {
	start, end int
	text       string
	tokens     int
	key        []float32
}

func (r *retrieval) CompressHistory(ctx context.Context, in Input) (Output, error) {
	start := time.Now()
	st, _ := in.State.(*retrievalState)
	if st == nil {
		st = &retrievalState{}
	}
	last := lastTurnsStart(in.History, 1)
	st.grow(in.History[:max(last, 0)], r.tok)
	past := st.turns
	if last <= 0 || len(past) <= r.p.Keep && r.p.Budget == 0 {
		out, err := Unchanged(Input{Task: in.Task, History: in.History})
		out.State = st
		return out, err
	}
	query := retrievalQuery(in, last)
	ev := &Event{Kind: KindHistory, Step: in.Step, Strategy: Retrieval}
	order, err := r.rank(ctx, st, query, ev)
	if err != nil {
		return Output{}, fmt.Errorf("retrieval at step %d: %w", in.Step, err)
	}
	var chosen []int
	used := 0
	for _, i := range order {
		if len(chosen) == r.p.Keep {
			break
		}
		if r.p.Budget > 0 && used+past[i].tokens > r.p.Budget {
			continue
		}
		chosen = append(chosen, i)
		used += past[i].tokens
	}
	slices.Sort(chosen)
	first := 1 // History opens with the first turn
	var msgs []llm.Message
	kept := make([]int, 0, len(chosen)+1)
	for _, i := range chosen {
		msgs = append(msgs, in.History[past[i].start:past[i].end]...)
		kept = append(kept, first+i)
	}
	var dropped []int
	for i := range past {
		if !slices.Contains(chosen, i) {
			dropped = append(dropped, first+i)
		}
	}
	msgs = append(msgs, in.History[last:]...)
	ev.Levels = map[string][]int{"kept": append(kept, in.Step), "dropped": dropped}
	for _, t := range past {
		ev.TokensIn += t.tokens
	}
	ev.TokensOut = used
	ev.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	return Output{Messages: withTask(in.Task, nil, msgs), State: st, Event: ev}, nil
}

// retrievalQuery is what the next step is about: the plan's next step when
// there is a plan, and the last turn's thought and action.
func retrievalQuery(in Input, last int) string {
	var b strings.Builder
	if len(in.Plan) > 0 {
		b.WriteString(in.Plan[0])
		b.WriteByte('\n')
	}
	m := in.History[last]
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		b.WriteByte('\n')
		b.WriteString(c.Arguments)
	}
	return b.String()
}

// grow adds the turns of past not yet in st.
func (st *retrievalState) grow(past []llm.Message, tok *llm.Tokenizer) {
	from := 0
	if k := len(st.turns); k > 0 {
		from = st.turns[k-1].end
		if from > len(past) {
			st.turns, from = nil, 0
		}
	}
	for _, t := range turnsOf(past[from:], 0) {
		msgs := past[from+t.Start : from+t.End]
		text := FormatHistory(msgs, 0)
		st.turns = append(st.turns, retrievedTurn{start: from + t.Start, end: from + t.End, text: text, tokens: tok.CountMessages(msgs)})
	}
}

// rank orders the past turns by relevance to query, best first; turns
// that score nothing come last, newest first.
func (r *retrieval) rank(ctx context.Context, st *retrievalState, query string, ev *Event) ([]int, error) {
	n := len(st.turns)
	var order []int
	if r.emb == nil {
		docs := make([]string, n)
		for i, t := range st.turns {
			docs[i] = t.text
		}
		order = env.NewBM25(docs).Search(query, n)
	} else {
		var texts []string
		var missing []int
		for i, t := range st.turns {
			if t.key == nil {
				missing = append(missing, i)
				texts = append(texts, t.text)
			}
		}
		vecs, _, err := r.emb.Embed(ctx, append(texts, query))
		if err != nil {
			return nil, err
		}
		if len(vecs) != len(texts)+1 {
			return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(texts)+1)
		}
		ev.EmbedCalls = 1
		for j, i := range missing {
			st.turns[i].key = normalize(vecs[j])
		}
		q := normalize(vecs[len(vecs)-1])
		scores := make([]float64, n)
		for i, t := range st.turns {
			scores[i] = dot(q, t.key)
			if scores[i] > 0 {
				order = append(order, i)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case scores[a] > scores[b]:
				return -1
			case scores[a] < scores[b]:
				return 1
			}
			return 0
		})
	}
	ranked := make([]bool, n)
	for _, i := range order {
		ranked[i] = true
	}
	for i := n - 1; i >= 0; i-- {
		if !ranked[i] {
			order = append(order, i)
		}
	}
	return order, nil
}
