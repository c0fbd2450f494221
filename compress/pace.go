package compress

import (
	"context"
	"encoding/json"
	"fmt"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// PACE levels (eq. 7), coarsest last.
const (
	LevelFull        = "full"
	LevelDetailed    = "detailed"
	LevelBrief       = "brief"
	LevelPlaceholder = "placeholder"
)

// level indexes levelNames; the builder works on these, not on strings.
type level uint8

const (
	lvFull level = iota
	lvDetailed
	lvBrief
	lvPlaceholder
)

// levelNames are the representations from finest to coarsest.
var levelNames = [...]string{LevelFull, LevelDetailed, LevelBrief, LevelPlaceholder}

// GlimpseTool is PACE's tool: the agent asks for hidden chunks in full.
const GlimpseTool = "glimpse"

// PACE is PACE's context builder (multi-granularity chunks chosen by an
// embedding attention scorer under pressure-adaptive thresholds).
const PACE Name = "pace"

// PACEParams are PACE's (section 3.3, appendix C).
type PACEParams struct {
	// Alpha, Beta, Gamma are the base thresholds on relative weights.
	Alpha float64 `yaml:"alpha" json:"alpha"`
	Beta  float64 `yaml:"beta" json:"beta"`
	Gamma float64 `yaml:"gamma" json:"gamma"`
	// Lambda is the adaptation rate of the thresholds to pressure.
	Lambda float64 `yaml:"lambda" json:"lambda"`
	// Tau is the softmax temperature.
	Tau float64 `yaml:"tau" json:"tau"`
	// Recent is N, the last chunks kept in full and used as the query.
	Recent int `yaml:"recent" json:"recent"`
	// MaxSteps is T_max (0: the episode's step limit); Budget is B_max in
	// tokens (0: the agent's context window, else DefaultPACEBudget).
	MaxSteps int `yaml:"max_steps" json:"max_steps"`
	Budget   int `yaml:"budget" json:"budget"`
	// Glimpse offers the glimpse tool; GlimpseMax chunks per call.
	Glimpse    bool `yaml:"glimpse" json:"glimpse"`
	GlimpseMax int  `yaml:"glimpse_max" json:"glimpse_max"`
	// MaxInput is L_max, the characters of a chunk or query embedded.
	MaxInput int `yaml:"max_input" json:"max_input"`
}

// Defaults of PACE (appendix C).
const (
	DefaultPACEAlpha      = 0.4
	DefaultPACEBeta       = 0.8
	DefaultPACEGamma      = 1.5
	DefaultPACELambda     = 0.5
	DefaultPACETau        = 0.3
	DefaultPACERecent     = 2
	DefaultPACEBudget     = 128000
	DefaultPACEGlimpseMax = 3
	DefaultPACEMaxInput   = 8192
)

func defaultPACE() ModuleParams {
	return &PACEParams{Alpha: DefaultPACEAlpha, Beta: DefaultPACEBeta, Gamma: DefaultPACEGamma, Lambda: DefaultPACELambda,
		Tau: DefaultPACETau, Recent: DefaultPACERecent, Glimpse: true, GlimpseMax: DefaultPACEGlimpseMax, MaxInput: DefaultPACEMaxInput}
}

func (p *PACEParams) Validate() error {
	f := fieldErrors{prefix: Section + ".pace"}
	f.check(p.Alpha > 0 && p.Alpha < p.Beta && p.Beta < p.Gamma, "", "thresholds must satisfy 0 < alpha < beta < gamma, got alpha=%v beta=%v gamma=%v", p.Alpha, p.Beta, p.Gamma)
	f.check(p.Lambda >= 0, "lambda", "must not be negative")
	f.check(p.Tau > 0, "tau", "must be positive")
	f.check(p.Recent > 0, "recent", "must be positive")
	f.check(p.MaxSteps >= 0, "max_steps", "must not be negative")
	f.check(p.Budget >= 0, "budget", "must not be negative")
	f.check(p.GlimpseMax > 0, "glimpse_max", "must be positive")
	f.check(p.MaxInput > 0, "max_input", "must be positive")
	return f.err()
}

func init() {
	Register(Module{
		Name: PACE, Rank: 70, Doc: "multi-granularity chunks chosen by embedding attention under pressure (PACE)",
		Caps: Caps{Compressor: true, Embedder: true},
		Key:  "pace", Params: defaultPACE,
		New: func(mp ModuleParams, d Deps) (*Strategy, error) {
			p := *mp.(*PACEParams)
			c, err := newPACE(p, d)
			if err != nil {
				return nil, err
			}
			s := &Strategy{History: c, CallsCompressor: true, CallsEmbedder: true, Params: fingerprint(p)}
			if p.Glimpse {
				s.Tools = c
			}
			return s, nil
		},
	})
}

// pace is PACE's context builder (section 3): every turn is a chunk with
// four representations; an embedding scorer predicts each older chunk's
// relevance to the next step, and pressure-adaptive thresholds choose the
// representation shown.
type pace struct {
	p   PACEParams
	tok *llm.Tokenizer
	llm Completer
	emb Embedder

	// sums caches the detailed and brief summaries by chunk content, so a
	// chunk is summarized once however many rollouts and steps show it.
	mu   sync.Mutex
	sums map[string]paceSummary
	// headerTok is paceHeader's token count.
	headerTok int
}

type paceSummary struct{ detailed, brief string }

// maxPACECache bounds the summary cache; when full it starts over.
const maxPACECache = 1 << 16

// paceState is a conversation's chunks, grown as the history grows: key
// embeddings are computed once per chunk (eq. 4) and kept here.
type paceState struct {
	chunks []*chunk
	// ends[i] is the history index where chunk i ends.
	ends []int
	// task and taskTok cache the task's token count.
	task    string
	taskTok int
	// keys holds the unit key vectors of chunks[:keyed], dim floats each,
	// in one block: scoring is a pass of dot products over contiguous
	// memory (cosine of unit vectors).
	keys       []float32
	dim, keyed int
	// Per-step buffers, reused so a step allocates nothing per chunk.
	weights []float64
	scores  []float32
	levels  []level
	order   []uint64
	scratch []uint64
}

type chunk struct {
	step int
	full string // R_full: the turn as FormatHistory renders it
	ph   string // R_ph
	// head opens the chunk's line in the assembled context: "\n[chunk N | ".
	head string
	// tokens of each representation, counted once.
	fullTok, phTok int
	sum            *paceSummary
	detTok, brTok  int
}

var (
	_ History = (*pace)(nil)
	_ Tools   = (*pace)(nil)
)

func newPACE(p PACEParams, d Deps) (*pace, error) {
	if d.Compressor == nil {
		return nil, fmt.Errorf("strategy pace needs a compressor model (roles.%s) for the chunk summaries", llm.RoleCompressor)
	}
	if d.Embedder == nil {
		return nil, fmt.Errorf("strategy pace needs an embedder (roles.%s) for the attention scorer", llm.RoleEmbedder)
	}
	return &pace{p: p, tok: d.Tokenizer, llm: d.Compressor, emb: d.Embedder, sums: map[string]paceSummary{}, headerTok: d.Tokenizer.Count(paceHeader)}, nil
}

// relativeWeights turns cosine scores s, whose maximum is hi, into M·w_i in
// place (eq. 5, shifted by hi: the same softmax without overflow).
func relativeWeights(s []float64, hi, tau float64) {
	var z float64
	for i, x := range s {
		s[i] = math.Exp((x - hi) / tau)
		z += s[i]
	}
	m := float64(len(s))
	for i := range s {
		s[i] = m * s[i] / z
	}
}

// Pressure is P_t = max(t/T_max, |C_{t-1}|/B_max) of eq. 6, in [0, 1].
func Pressure(t, tMax, ctxTokens, bMax int) float64 {
	p := 0.0
	if tMax > 0 {
		p = float64(t) / float64(tMax)
	}
	if bMax > 0 {
		p = max(p, float64(ctxTokens)/float64(bMax))
	}
	return min(max(p, 0), 1)
}

// Select is eq. 7: the representation of a chunk with relative weight w
// under pressure p, with thresholds (α, β, γ)·(1 + λp).
func (p PACEParams) Select(w, pressure float64) string {
	return levelNames[p.thresholds(pressure).of(w)]
}

// thresholds are (α_t, β_t, γ_t) of eq. 7 at pressure p.
type thresholds struct{ alpha, beta, gamma float64 }

func (p PACEParams) thresholds(pressure float64) thresholds {
	f := 1 + p.Lambda*pressure
	return thresholds{p.Alpha * f, p.Beta * f, p.Gamma * f}
}

func (t thresholds) of(w float64) level {
	switch {
	case w > t.gamma:
		return lvFull
	case w > t.beta:
		return lvDetailed
	case w > t.alpha:
		return lvBrief
	}
	return lvPlaceholder
}

func (c *pace) CompressHistory(ctx context.Context, in Input) (Output, error) {
	start := time.Now()
	st, _ := in.State.(*paceState)
	if st == nil {
		st = &paceState{}
	}
	st = c.grow(st, in.History)
	n := c.p.Recent
	t := len(st.chunks)
	if t <= n {
		out, err := Unchanged(Input{Task: in.Task, History: in.History})
		out.State = st
		return out, err
	}
	old := st.chunks[:t-n]
	recentFrom := st.ends[t-n-1]
	ev := &Event{Kind: KindHistory, Step: in.Step, Strategy: PACE}
	// Keys of chunks that joined the older ones since the last step, and
	// the query, in one embedding request (eq. 4).
	texts := make([]string, 0, len(old)-st.keyed+1)
	for _, ch := range old[st.keyed:] {
		texts = append(texts, c.truncate(ch.full))
	}
	var q strings.Builder
	q.WriteString(in.Task)
	for _, ch := range st.chunks[t-n:] {
		q.WriteString("\n")
		q.WriteString(ch.full)
	}
	texts = append(texts, c.truncate(q.String()))
	vecs, _, err := c.emb.Embed(ctx, texts)
	if err != nil {
		return Output{}, fmt.Errorf("pace: embed at step %d: %w", in.Step, err)
	}
	if len(vecs) != len(texts) {
		return Output{}, fmt.Errorf("pace: embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	ev.EmbedCalls = 1
	for _, v := range vecs {
		if st.dim == 0 {
			st.dim = len(v)
		}
		if len(v) != st.dim || len(v) == 0 {
			return Output{}, fmt.Errorf("pace: embedder returned a vector of %d dimensions, want %d (the first vector's, and more than 0)", len(v), st.dim)
		}
	}
	for _, v := range vecs[:len(vecs)-1] {
		st.keys = appendUnit(st.keys, v)
	}
	st.keyed = len(old)
	query := appendUnit(nil, vecs[len(vecs)-1])

	tMax := c.p.MaxSteps
	if tMax == 0 {
		tMax = in.MaxSteps
	}
	bMax := c.p.Budget
	if bMax == 0 {
		bMax = in.Window
	}
	if bMax == 0 {
		bMax = DefaultPACEBudget
	}
	pressure := Pressure(t, tMax, in.ContextTokens, bMax)
	c.selectLevels(st, len(old), query, pressure)
	total, err := c.summaries(ctx, old, st.levels, ev)
	if err != nil {
		return Output{}, err
	}
	// The builder assembles C_t within the token budget (section 3.2): when
	// the selection does not fit, the least relevant chunks go down a level
	// until it does. The last N chunks and the task are never cut.
	if st.task != in.Task {
		st.task, st.taskTok = in.Task, c.tok.Count(in.Task)
	}
	fixed := st.taskTok + c.tok.CountMessages(in.History[recentFrom:])
	if err := c.fit(ctx, st, old, total, int(paceFill*float64(bMax))-fixed, ev); err != nil {
		return Output{}, err
	}
	text, tokens := c.assemble(old, st.levels, ev)
	ev.TokensOut = tokens
	ev.Pressure = pressure
	ev.Output = ""
	ev.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	msgs := withTask(in.Task, []llm.Message{{Role: "user", Content: text}}, in.History[recentFrom:])
	return Output{Messages: msgs, State: st, Event: ev}, nil
}

// grow adds a chunk for every turn of history not yet in st. A history
// that does not extend st's (another conversation) starts over.
func (c *pace) grow(st *paceState, history []llm.Message) *paceState {
	from := 0
	if k := len(st.ends); k > 0 {
		from = st.ends[k-1]
		if from > len(history) {
			st, from = &paceState{}, 0
		}
	}
	// The last chunk grows when messages other than a new turn follow it
	// (tool results that arrived after it was made).
	if k := len(st.chunks); k > 0 && from < len(history) && history[from].Role != "assistant" {
		st.chunks, st.ends = st.chunks[:k-1], st.ends[:k-1]
		if st.keyed > k-1 {
			st.keyed = k - 1
			st.keys = st.keys[:st.keyed*st.dim]
		}
		from = 0
		if k > 1 {
			from = st.ends[k-2]
		}
	}
	for _, tr := range turnsOf(history[from:], len(st.chunks)+1) {
		msgs := history[from+tr.Start : from+tr.End]
		full := FormatHistory(msgs, tr.Step)
		ph := placeholder(tr.Step, msgs)
		st.chunks = append(st.chunks, &chunk{
			step: tr.Step, full: full, ph: ph, head: "\n[chunk " + strconv.Itoa(tr.Step) + " | ",
			fullTok: c.tok.Count(full), phTok: c.tok.Count(ph),
		})
		st.ends = append(st.ends, from+tr.End)
	}
	return st
}

// placeholder is R_ph: the step's action, no result.
func placeholder(step int, msgs []llm.Message) string {
	action := "no tool call"
	if len(msgs) > 0 && len(msgs[0].ToolCalls) > 0 {
		tc := msgs[0].ToolCalls[0]
		args := tc.Arguments
		if len(args) > 120 {
			args = args[:120] + "…"
		}
		action = tc.Name + "(" + args + ")"
	}
	return fmt.Sprintf("step %d: %s; result hidden", step, action)
}

func (c *pace) truncate(s string) string {
	if len(s) > c.p.MaxInput {
		return s[:c.p.MaxInput]
	}
	return s
}

// appendUnit appends v scaled to unit length (a zero vector stays zero), so
// cosine similarity is a dot product.
func appendUnit(dst, v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	inv := 0.0
	if n > 0 {
		inv = 1 / math.Sqrt(n)
	}
	for _, x := range v {
		dst = append(dst, float32(float64(x)*inv))
	}
	return dst
}

func normalize(v []float32) []float32 { return appendUnit(make([]float32, 0, len(v)), v) }

// dot is the dot product of a and b (the shorter's length).
func dot(a, b []float32) float64 {
	n := min(len(a), len(b))
	return float64(blasImpl.Sdot(n, a, 1, b, 1))
}

// blasImpl is gonum's BLAS: its float32 dot product and matrix-vector
// product are assembly on amd64, twice as fast as the four-sum Go loop they
// replaced at the embedded model's 256-float keys (BenchmarkPACEBuilder).
var blasImpl gonum.Implementation

// paceFill is the share of B_max the builder fills, leaving room for the
// agent's next turn and a glimpse.
const paceFill = 0.85

// summaries makes the detailed and brief summaries the chosen levels need,
// once per chunk, and returns the tokens of the chunks at their levels.
func (c *pace) summaries(ctx context.Context, old []*chunk, levels []level, ev *Event) (int, error) {
	total := 0
	for i, ch := range old {
		if lv := levels[i]; (lv == lvDetailed || lv == lvBrief) && ch.sum == nil {
			calls, err := c.summarize(ctx, ch, ev)
			ev.Calls += calls
			if err != nil {
				return 0, fmt.Errorf("pace: summarize step %d: %w", ch.step, err)
			}
		}
		total += ch.tokensAt(levels[i]) + paceLineTokens
	}
	return total, nil
}

// tokensAt is the size of ch shown at lv.
func (ch *chunk) tokensAt(lv level) int {
	switch lv {
	case lvFull:
		return ch.fullTok
	case lvDetailed:
		return ch.detTok
	case lvBrief:
		return ch.brTok
	}
	return ch.phTok
}

// fit lowers the least relevant chunks one level at a time until the chunk
// text (total tokens) fits budget or every chunk is a placeholder.
func (c *pace) fit(ctx context.Context, st *paceState, old []*chunk, total, budget int, ev *Event) error {
	if total <= budget {
		return nil
	}
	levels := st.levels
	// Ascending weight, ties by position, of the chunks that can go down
	// (placeholders cannot): the weight's float32 bits (order preserving
	// for non-negative numbers) above the index, in a stable radix sort on
	// the weight bits, linear in the chunks.
	keys := st.order[:0]
	for i, w := range st.weights[:len(old)] {
		if levels[i] != lvPlaceholder {
			keys = append(keys, uint64(math.Float32bits(float32(w)))<<32|uint64(i))
		}
	}
	st.order = keys
	st.scratch = sortHigh32(keys, st.scratch)
	for changed := true; changed && total > budget; {
		changed = false
		for _, key := range keys {
			i := int(uint32(key))
			if total <= budget {
				break
			}
			if levels[i] == lvPlaceholder {
				continue
			}
			next := levels[i] + 1
			if next != lvPlaceholder && old[i].sum == nil {
				calls, err := c.summarize(ctx, old[i], ev)
				ev.Calls += calls
				if err != nil {
					return fmt.Errorf("pace: summarize step %d: %w", old[i].step, err)
				}
			}
			total += old[i].tokensAt(next) - old[i].tokensAt(levels[i])
			levels[i] = next
			changed = true
		}
	}
	return nil
}

// sortHigh32 sorts keys by their upper 32 bits, keeping the order of equal
// ones (an LSD radix sort, a byte per pass), using tmp as scratch space; it
// returns tmp for reuse.
func sortHigh32(keys, tmp []uint64) []uint64 {
	tmp = slices.Grow(tmp[:0], len(keys))[:len(keys)]
	src, dst := keys, tmp
	for shift := 32; shift < 64; shift += 8 {
		var count [257]int
		for _, k := range src {
			count[(k>>shift)&0xff+1]++
		}
		for b := 1; b < len(count); b++ {
			count[b] += count[b-1]
		}
		for _, k := range src {
			b := (k >> shift) & 0xff
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	// Four passes: the sorted keys are back in keys.
	return tmp
}

// paceLineTokens is about what a "[chunk N | level] " prefix costs.
const paceLineTokens = 8

// selectLevels scores the m older chunks against the unit query (one
// matrix-vector product over the cached unit keys) and applies eqs. 5–7, into st.weights
// and st.levels.
func (c *pace) selectLevels(st *paceState, m int, query []float32, pressure float64) {
	w := slices.Grow(st.weights[:0], m)[:m]
	lv := slices.Grow(st.levels[:0], m)[:m]
	st.weights, st.levels = w, lv
	d := st.dim
	st.scores = slices.Grow(st.scores[:0], m)[:m]
	blasImpl.Sgemv(blas.NoTrans, m, d, 1, st.keys[:m*d], d, query[:d], 1, 0, st.scores, 1)
	hi := math.Inf(-1)
	for i, s := range st.scores {
		w[i] = float64(s)
		hi = max(hi, w[i])
	}
	relativeWeights(w, hi, c.p.Tau)
	th := c.p.thresholds(pressure)
	for i, x := range w {
		lv[i] = th.of(x)
	}
}

// summarize fills ch's detailed and brief summaries from the cache or one
// compressor call (templates/pace_summary.tmpl).
func (c *pace) summarize(ctx context.Context, ch *chunk, ev *Event) (int, error) {
	c.mu.Lock()
	s, ok := c.sums[ch.full]
	c.mu.Unlock()
	calls := 0
	if !ok {
		prompt, err := templates.Render("pace_summary.tmpl", map[string]any{"chunk": ch.full})
		if err != nil {
			return 0, err
		}
		resp, err := c.llm.Complete(ctx, llm.Request{Purpose: llm.PurposeCompressor, Messages: []llm.Message{{Role: "user", Content: prompt}}})
		if err != nil {
			return 1, err
		}
		calls = 1
		ev.Usage.PromptTokens += resp.Usage.PromptTokens
		ev.Usage.CompletionTokens += resp.Usage.CompletionTokens
		ev.Retries += resp.Retries
		ev.CostUSD += costOf(c.llm, resp.Usage)
		ev.Model = resp.Model
		if resp.Cached {
			ev.CacheHits++
		}
		s = parsePACESummary(resp.Message.Content, ch.ph)
		c.mu.Lock()
		if len(c.sums) >= maxPACECache {
			clear(c.sums)
		}
		c.sums[ch.full] = s
		c.mu.Unlock()
	}
	ch.sum = &s
	ch.detTok, ch.brTok = c.tok.Count(s.detailed), c.tok.Count(s.brief)
	return calls, nil
}

// parsePACESummary reads "DETAILED: ..." and "BRIEF: ..."; a missing part
// falls back to the other, then to the placeholder (section 3.4: fall back
// when a summary is unavailable).
func parsePACESummary(out, ph string) paceSummary {
	var s paceSummary
	lower := strings.ToLower(out)
	d := strings.Index(lower, "detailed:")
	b := strings.Index(lower, "brief:")
	switch {
	case d >= 0 && b > d:
		s.detailed, s.brief = out[d+len("detailed:"):b], out[b+len("brief:"):]
	case d >= 0:
		s.detailed = out[d+len("detailed:"):]
	case b >= 0:
		s.brief = out[b+len("brief:"):]
	default:
		s.detailed = out
	}
	s.detailed, s.brief = strings.TrimSpace(s.detailed), strings.TrimSpace(s.brief)
	if s.brief == "" {
		s.brief = ph
	}
	if s.detailed == "" {
		s.detailed = s.brief
	}
	return s
}

// paceHeader opens the message holding the older chunks.
const paceHeader = "Earlier steps, shown at a detail chosen by relevance. Call glimpse with chunk ids to see hidden chunks in full."

// assemble renders the older chunks at their levels (eq. 8) and returns
// the text and its token count (from the per-chunk counts).
func (c *pace) assemble(old []*chunk, levels []level, ev *Event) (string, int) {
	size := len(paceHeader)
	tokens := c.headerTok
	var steps [lvPlaceholder][]int // the steps shown at each level above placeholder
	for i, ch := range old {
		lv := levels[i]
		size += len(ch.head) + len(levelNames[lv]) + len("] ") + len(ch.rep(lv))
		tokens += ch.tokensAt(lv) + paceLineTokens
		ev.TokensIn += ch.fullTok
		if lv != lvPlaceholder {
			steps[lv] = append(steps[lv], ch.step)
		}
	}
	ev.Levels = map[string][]int{}
	for lv, s := range steps {
		if len(s) > 0 {
			ev.Levels[levelNames[lv]] = s
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(paceHeader)
	for i, ch := range old {
		b.WriteString(ch.head)
		b.WriteString(levelNames[levels[i]])
		b.WriteString("] ")
		b.WriteString(ch.rep(levels[i]))
	}
	return b.String(), tokens
}

// rep is ch's text at lv.
func (ch *chunk) rep(lv level) string {
	switch lv {
	case lvFull:
		return strings.TrimRight(ch.full, "\n")
	case lvDetailed:
		return ch.sum.detailed
	case lvBrief:
		return ch.sum.brief
	}
	return ch.ph
}

// Tools is glimpse, when enabled.
func (c *pace) Tools() []llm.Tool {
	return []llm.Tool{{
		Name:        GlimpseTool,
		Description: fmt.Sprintf("Show earlier chunks in full, by chunk id (at most %d per call), when a summary or placeholder hides what you need.", c.p.GlimpseMax),
		Parameters:  json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"chunks":{"type":"array","items":{"type":"integer"},"maxItems":%d,"description":"Chunk ids, as in [chunk N | ...]."}},"required":["chunks"]}`, c.p.GlimpseMax)),
	}}
}

// CallTool answers glimpse with the full chunks; bad arguments get an
// "error:" answer, as environments answer bad actions. A chunk that is a
// glimpse itself stands for the chunks it showed, so glimpses never nest
// (each would hold the last one's text again) and the answer stays within
// glimpse_max chunks.
func (c *pace) CallTool(_ context.Context, in Input, call llm.ToolCall) string {
	ids, ok := glimpseArgs(call.Arguments)
	if !ok {
		return `error: glimpse takes {"chunks": [chunk ids]}`
	}
	if len(ids) > c.p.GlimpseMax {
		return fmt.Sprintf("error: glimpse shows at most %d chunks per call, got %d", c.p.GlimpseMax, len(ids))
	}
	turns := turnsOf(in.History, 1)
	var b strings.Builder
	shown := map[int]bool{}
	var show func(id int)
	show = func(id int) {
		if shown[id] || len(shown) == c.p.GlimpseMax {
			return
		}
		if id < 1 || id > len(turns) {
			fmt.Fprintf(&b, "error: no chunk %d (chunks are 1 to %d)\n", id, len(turns))
			return
		}
		tr := turns[id-1]
		if tc := in.History[tr.Start].ToolCalls; len(tc) > 0 && tc[0].Name == GlimpseTool {
			if inner, ok := glimpseArgs(tc[0].Arguments); ok {
				for _, j := range inner {
					if j < id { // a glimpse shows earlier chunks only
						show(j)
					}
				}
				return
			}
		}
		shown[id] = true
		b.WriteString(FormatHistory(in.History[tr.Start:tr.End], tr.Step))
	}
	for _, id := range ids {
		show(id)
	}
	return strings.TrimRight(b.String(), "\n")
}

// glimpseArgs reads glimpse's chunk ids; ok is false when there are none.
func glimpseArgs(args string) ([]int, bool) {
	var a struct {
		Chunks []int `json:"chunks"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil || len(a.Chunks) == 0 {
		return nil, false
	}
	return a.Chunks, true
}
