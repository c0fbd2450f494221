package synth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/splitmix"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/templates"
)

// The evolutionary teacher-prompt search of PAACE section 3 (optimize synth
// evolve): a population of teacher prompts is scored on a sample of
// workflows by a composite of success rate (the share accepted), semantic
// fidelity (the mean similarity of the final outputs) and compression
// strength (one minus the mean compression ratio); the best survive
// (elitism) and the optimizer role writes the rest of the next generation,
// rewriting one parent given its rejections and their reasons (mutation)
// or combining two (crossover). Every prompt goes into the guideline
// registry with its parents and scores.

// EvolveSettings are the job file's synth.evolve section.
type EvolveSettings struct {
	Population  int     `yaml:"population" json:"population"`
	Generations int     `yaml:"generations" json:"generations"`
	Sample      int     `yaml:"sample" json:"sample"`
	Elite       int     `yaml:"elite" json:"elite"`
	Weights     Weights `yaml:"weights" json:"weights"`
}

// Weights of the composite score.
type Weights struct {
	Success     float64 `yaml:"success" json:"success"`
	Fidelity    float64 `yaml:"fidelity" json:"fidelity"`
	Compression float64 `yaml:"compression" json:"compression"`
}

// Defaults of EvolveSettings (PAACE: a population of 8 over 3 generations).
var (
	DefaultPopulation  = 8
	DefaultGenerations = 3
	DefaultSample      = 16
	DefaultElite       = 2
	DefaultWeights     = Weights{Success: 0.5, Fidelity: 0.3, Compression: 0.2}
)

func (s EvolveSettings) withDefaults() EvolveSettings {
	if s.Population == 0 {
		s.Population = DefaultPopulation
	}
	if s.Generations == 0 {
		s.Generations = DefaultGenerations
	}
	if s.Sample == 0 {
		s.Sample = DefaultSample
	}
	if s.Elite == 0 {
		s.Elite = DefaultElite
	}
	if s.Weights == (Weights{}) {
		s.Weights = DefaultWeights
	}
	return s
}

// problems reports the invalid settings; a zero one takes its default.
func (s EvolveSettings) problems() []Problem {
	s = s.withDefaults()
	var ps []Problem
	if s.Population < 2 || s.Population > 256 {
		ps = append(ps, Problem{"evolve.population", fmt.Sprintf("%d: want 2 to 256 prompts", s.Population)})
	}
	if s.Generations < 1 || s.Generations > 100 {
		ps = append(ps, Problem{"evolve.generations", fmt.Sprintf("%d: want 1 to 100", s.Generations)})
	}
	if s.Sample < 1 {
		ps = append(ps, Problem{"evolve.sample", fmt.Sprintf("%d: want at least 1 workflow", s.Sample)})
	}
	if s.Elite < 1 || s.Elite >= s.Population {
		ps = append(ps, Problem{"evolve.elite", fmt.Sprintf("%d: want 1 to population-1 (%d)", s.Elite, s.Population-1)})
	}
	w := s.Weights
	if w.Success < 0 || w.Fidelity < 0 || w.Compression < 0 || w.Success+w.Fidelity+w.Compression == 0 {
		ps = append(ps, Problem{"evolve.weights", fmt.Sprintf("%+v: want weights of at least 0, not all 0", w)})
	}
	return ps
}

// Scores are a prompt's figures on the sample.
type Scores struct {
	Executed int `json:"executed"`
	Accepted int `json:"accepted"`
	// Success is the share accepted, Fidelity the mean similarity and
	// Compression one minus the mean compression ratio.
	Success     float64 `json:"success"`
	Fidelity    float64 `json:"fidelity"`
	Compression float64 `json:"compression"`
	Composite   float64 `json:"composite"`
}

func (s Scores) registry() map[string]float64 {
	return map[string]float64{"success": s.Success, "fidelity": s.Fidelity, "compression": s.Compression, "composite": s.Composite}
}

// Member is one prompt of a generation.
type Member struct {
	ID      string   `json:"id"`
	Step    string   `json:"step"`
	Parents []string `json:"parents,omitempty"`
	Scores  Scores   `json:"scores"`
	// Elite marks a prompt kept from the generation before.
	Elite bool `json:"elite,omitempty"`
}

// Generation is one generation's population, best first, and the children
// its optimizer calls wrote that were not valid prompts.
type Generation struct {
	N        int       `json:"generation"`
	Members  []Member  `json:"members"`
	Rejected []Invalid `json:"rejected,omitempty"`
}

// Invalid is a child prompt that failed guideline validation, or repeated
// a prompt of the population.
type Invalid struct {
	ID      string   `json:"id"`
	Parents []string `json:"parents"`
	Reason  string   `json:"reason"`
}

// EvolveSummary is evolution.json.
type EvolveSummary struct {
	Settings    EvolveSettings `json:"settings"`
	Generations []Generation   `json:"generations"`
	Best        Member         `json:"best"`
	// BestFile is the best prompt's source, the teacher of the export.
	BestFile string               `json:"best_file"`
	Usage    map[string]RoleUsage `json:"usage"`
	// EmbeddedModel and EmbeddedRoles are RunSummary's, over Usage.
	EmbeddedModel bool     `json:"embedded_model"`
	EmbeddedRoles []string `json:"embedded_roles,omitempty"`
}

// Files of an evolution directory.
const (
	EvolutionFile = "evolution.json"
	SampleFile    = "sample.jsonl"
	BestFile      = "best.tmpl"
	PromptsDir    = "prompts"
	RegistryDir   = "registry"
	// ChildrenFile journals each child the optimizer wrote, so a re-run
	// replays them instead of asking again.
	ChildrenFile = "children.jsonl"
)

// childRecord is a line of children.jsonl: one optimizer call of the
// search and what came of it. Without it a re-run after a kill would ask
// the optimizer again for every child; unless each answer came back from
// the cache, the lineage would fork and the prompts already scored would
// be lost.
type childRecord struct {
	Generation int `json:"generation"`
	Child      int `json:"child"`
	// Request is the SHA-256 of the optimizer's request and endpoint
	// (Evolver.OptimizerModels): a record is replayed only for the same.
	Request string   `json:"request"`
	ID      string   `json:"id"`
	Step    string   `json:"step"`
	Parents []string `json:"parents"`
	// Rejected is why the child did not join the population.
	Rejected string    `json:"rejected,omitempty"`
	Usage    RoleUsage `json:"usage"`
}

// childKey identifies child i of generation g.
type childKey struct{ g, i int }

// Evolver runs the search.
type Evolver struct {
	Settings EvolveSettings
	Seed     int
	// Executor returns the dual executor with teacher prompt p.
	Executor  func(p *compress.Prompt) (*Executor, error)
	Optimizer Completer
	// OptimizerModels identifies Optimizer's endpoint (model, address,
	// sampling settings, the embedded model's version): a child journaled
	// by another optimizer is not replayed.
	OptimizerModels string
	Registry        *guideline.Registry
	Concurrency     int
	// Embedded says, by role, whether the embedded offline model answers
	// it (Executor.Embedded).
	Embedded map[string]bool
	// Limits bound the workflows file (zero fields: the defaults).
	Limits Limits
}

// Evolve searches from seed (its source and origin) on a sample of the
// workflows in wfs and writes evolution.json, best.tmpl, the sample and
// each prompt's run into dir. Each prompt's run resumes, so a re-run after
// a kill reuses what was scored.
func (e *Evolver) Evolve(ctx context.Context, seedSrc, origin, wfs, dir string) (EvolveSummary, error) {
	st := e.Settings
	if ps := st.problems(); len(ps) > 0 {
		return EvolveSummary{}, &InvalidError{What: "evolution settings", Problems: ps}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return EvolveSummary{}, fmt.Errorf("evolve: %w", err)
	}
	sample, err := writeSample(wfs, filepath.Join(dir, SampleFile), st.Sample, e.Seed, e.Limits)
	if err != nil {
		return EvolveSummary{}, err
	}
	ev := &evolution{Evolver: e, dir: dir, sample: sample, scored: map[string]scored{}, sum: EvolveSummary{Settings: st, Usage: map[string]RoleUsage{}}, journaled: map[childKey]childRecord{}}
	if err := ev.openJournal(); err != nil {
		return ev.sum, err
	}
	defer ev.journal.Close()
	seed, t, err := e.Registry.Put(guideline.Record{Kind: guideline.KindHistory, Step: guideline.StepSeed, Source: origin}, normalizeSource(seedSrc))
	if err != nil {
		return ev.sum, err
	}
	if t == nil {
		return ev.sum, fmt.Errorf("%w: teacher prompt %s: %s", ErrInvalidTeacher, origin, strings.Join(seed.Validation.Problems, "; "))
	}
	pop := []Member{{ID: seed.ID, Step: guideline.StepSeed}}
	ev.templates = map[string]*guideline.Template{seed.ID: t}
	for g := 0; g < st.Generations; g++ {
		gen := Generation{N: g}
		if g > 0 {
			pop = ev.elites(pop)
		}
		for i := 0; len(pop) < st.Population; i++ {
			if i >= 2*st.Population {
				break // the optimizer keeps repeating or breaking prompts
			}
			if err := ev.score(ctx, pop); err != nil {
				return ev.sum, err
			}
			child, inv, err := ev.child(ctx, g, i, pop)
			if err != nil {
				return ev.sum, err
			}
			if inv != nil {
				gen.Rejected = append(gen.Rejected, *inv)
				continue
			}
			pop = append(pop, child)
		}
		if err := ev.score(ctx, pop); err != nil {
			return ev.sum, err
		}
		rank(pop)
		gen.Members = slices.Clone(pop)
		ev.sum.Generations = append(ev.sum.Generations, gen)
	}
	best := pop[0]
	_, src, err := e.Registry.Get(best.ID)
	if err != nil {
		return ev.sum, err
	}
	ev.sum.Best, ev.sum.BestFile = best, BestFile
	ev.sum.EmbeddedModel, ev.sum.EmbeddedRoles = embeddedUse(ev.sum.Usage, e.Embedded)
	if err := atomicfile.WriteFile(filepath.Join(dir, BestFile), []byte(src), 0o644); err != nil {
		return ev.sum, err
	}
	b, err := json.MarshalIndent(ev.sum, "", "  ")
	if err != nil {
		return ev.sum, err
	}
	return ev.sum, atomicfile.WriteFile(filepath.Join(dir, EvolutionFile), append(b, '\n'), 0o644)
}

// ErrInvalidTeacher marks a starting teacher prompt that is no valid
// history guideline.
var ErrInvalidTeacher = errors.New("invalid teacher prompt")

type scored struct {
	s        Scores
	feedback feedback
}

// feedback is what the optimizer is told about a prompt's run.
type feedback struct {
	rejections map[string]int
	lost       []string
	ratio      float64
}

type evolution struct {
	*Evolver
	dir       string
	sample    map[string]*Workflow
	templates map[string]*guideline.Template
	scored    map[string]scored
	sum       EvolveSummary
	// journal is children.jsonl, open for appending; journaled holds the
	// records a previous run wrote.
	journal   *os.File
	journaled map[childKey]childRecord
}

// openJournal reads the children a previous run journaled and opens the
// journal for appending (a line cut off by a kill is dropped).
func (ev *evolution) openJournal() error {
	f, err := openResumed(filepath.Join(ev.dir, ChildrenFile), func(line []byte) error {
		var r childRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Request == "" || r.ID == "" {
			return errors.New("not a child record")
		}
		ev.journaled[childKey{r.Generation, r.Child}] = r
		return nil
	})
	ev.journal = f
	return err
}

// replay returns the child a previous run journaled for req, if any.
func (ev *evolution) replay(k childKey, req string) (Member, *Invalid, bool, error) {
	r, ok := ev.journaled[k]
	if !ok {
		return Member{}, nil, false, nil
	}
	if r.Request != req {
		return Member{}, nil, false, fmt.Errorf("%w: %s: generation %d child %d was written for another optimizer request (other evolution settings, teacher, workflows or optimizer endpoint); use another --out",
			ErrForeignDir, filepath.Join(ev.dir, ChildrenFile), k.g, k.i)
	}
	ev.addOptimizerUsage(r.Usage)
	if r.Rejected != "" {
		return Member{}, &Invalid{ID: r.ID, Parents: r.Parents, Reason: r.Rejected}, true, nil
	}
	_, src, err := ev.Registry.Get(r.ID)
	if err != nil {
		return Member{}, nil, false, fmt.Errorf("replay child %s: %w", r.ID, err)
	}
	t, rep := guideline.Validate(guideline.KindHistory, src)
	if t == nil || t.ID() != r.ID {
		return Member{}, nil, false, fmt.Errorf("replay child %s: the registry's source no longer validates as it (%s)", r.ID, strings.Join(rep.Problems, "; "))
	}
	ev.templates[r.ID] = t
	return Member{ID: r.ID, Step: r.Step, Parents: r.Parents}, nil, true, nil
}

// record journals a child, one complete line.
func (ev *evolution) record(r childRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := ev.journal.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal child: %w", err)
	}
	return nil
}

func (ev *evolution) addOptimizerUsage(u RoleUsage) {
	t := ev.sum.Usage[llm.RoleOptimizer]
	t.add(u)
	ev.sum.Usage[llm.RoleOptimizer] = t
}

// score runs every member not yet scored on the sample.
func (ev *evolution) score(ctx context.Context, pop []Member) error {
	for i := range pop {
		m := &pop[i]
		if s, ok := ev.scored[m.ID]; ok {
			m.Scores = s.s
			continue
		}
		t := ev.templates[m.ID]
		x, err := ev.Executor(&compress.Prompt{ID: m.ID, Template: t})
		if err != nil {
			return err
		}
		runDir := filepath.Join(ev.dir, PromptsDir, m.ID)
		rs, err := Run(ctx, x, RunOptions{Workflows: filepath.Join(ev.dir, SampleFile), Dir: runDir, Concurrency: ev.Concurrency, Limits: ev.Limits})
		if err != nil {
			return fmt.Errorf("score prompt %s: %w", m.ID, err)
		}
		for role, u := range rs.Usage {
			t := ev.sum.Usage[role]
			t.add(u)
			ev.sum.Usage[role] = t
		}
		w := ev.Settings.Weights
		s := Scores{Executed: rs.Executed, Accepted: rs.Accepted, Success: rs.AcceptanceRate, Fidelity: rs.MeanSimilarity}
		if rs.Compressions > 0 {
			s.Compression = round6(1 - rs.MeanRatio)
		}
		s.Composite = round6((w.Success*s.Success + w.Fidelity*s.Fidelity + w.Compression*s.Compression) / (w.Success + w.Fidelity + w.Compression))
		fb, err := ev.feedback(runDir)
		if err != nil {
			return err
		}
		fb.ratio = rs.MeanRatio
		ev.scored[m.ID] = scored{s: s, feedback: fb}
		m.Scores = s
		if _, err := ev.Registry.Score(m.ID, s.registry()); err != nil {
			return err
		}
	}
	return nil
}

// maxLost bounds the lost input lines shown to the optimizer.
const maxLost = 20

// feedback reads a prompt's executions: the rejections by test, and the
// input lines that state an output the full run gave and the compressed
// run lost.
func (ev *evolution) feedback(runDir string) (feedback, error) {
	fb := feedback{rejections: map[string]int{}}
	f, err := os.Open(filepath.Join(runDir, ExecutionsFile))
	if err != nil {
		return fb, fmt.Errorf("read executions: %w", err)
	}
	defer f.Close()
	rd := jsonl.NewReader(f, f.Name(), jsonl.Limits{Line: 64 << 20})
	seen := map[string]bool{}
	for {
		line, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fb, err
		}
		var ex Execution
		if err := json.Unmarshal(line, &ex); err != nil {
			return fb, fmt.Errorf("%s:%d: %w", f.Name(), rd.Line(), err)
		}
		for _, r := range ex.Rejections {
			fb.rejections[r.Test]++
		}
		w := ev.sample[ex.ID]
		if ex.Accepted || !ex.Executed || w == nil {
			continue
		}
		full, comp := strings.Split(ex.Full.Output, "\n"), strings.Split(ex.Compressed.Output, "\n")
		for i := range min(len(full), len(comp)) {
			if full[i] == comp[i] {
				continue
			}
			_, ans, _ := strings.Cut(full[i], ": ")
			if ans == "" || ans == Unknown {
				continue
			}
			for l := range strings.Lines(w.Input) {
				l = strings.TrimSpace(l)
				if strings.Contains(l, ans) && !seen[l] && len(fb.lost) < maxLost {
					seen[l] = true
					fb.lost = append(fb.lost, l)
				}
			}
		}
	}
	return fb, nil
}

// elites keeps the best Elite members, marked.
func (ev *evolution) elites(pop []Member) []Member {
	rank(pop)
	out := slices.Clone(pop[:ev.Settings.Elite])
	for i := range out {
		out[i].Elite = true
	}
	return out
}

// rank orders pop best first: composite, then success; ties keep order.
func rank(pop []Member) {
	slices.SortStableFunc(pop, func(a, b Member) int {
		return cmp.Or(cmp.Compare(b.Scores.Composite, a.Scores.Composite), cmp.Compare(b.Scores.Success, a.Scores.Success))
	})
}

// child asks the optimizer for child i of generation g, or replays the
// answer a previous run journaled: a mutation of a
// parent (even i, or a population of one) or a crossover of a parent and
// the next by rank. Parents are taken by rank in turn, the best first, so
// every member is a parent before any is one twice.
func (ev *evolution) child(ctx context.Context, g, i int, pop []Member) (Member, *Invalid, error) {
	ranked := slices.Clone(pop)
	rank(ranked)
	a := ranked[(i/2)%len(ranked)]
	parents := []string{a.ID}
	step := guideline.StepMutation
	var b *Member
	if i%2 == 1 && len(ranked) > 1 {
		other := ranked[(i/2+1)%len(ranked)]
		b, step = &other, guideline.StepCrossover
		parents = append(parents, other.ID)
	}
	fa := ev.scored[a.ID]
	vars := map[string]any{
		"parent": ev.templates[a.ID].Source(), "executed": a.Scores.Executed, "accepted": a.Scores.Accepted,
		"fidelity": strconv.FormatFloat(a.Scores.Fidelity, 'f', 3, 64), "ratio": strconv.FormatFloat(fa.feedback.ratio, 'f', 3, 64),
		"rejections": countsLine(fa.feedback.rejections), "lost": fa.feedback.lost,
	}
	if b != nil {
		vars["rules"] = newLines(ev.templates[b.ID].Source(), ev.templates[a.ID].Source())
		vars["other_score"] = strconv.FormatFloat(b.Scores.Composite, 'f', 3, 64)
	}
	prompt, err := templates.Render("synth_evolve.tmpl", vars)
	if err != nil {
		return Member{}, nil, err
	}
	req := llm.Request{Purpose: llm.PurposeOptimizer, Messages: []llm.Message{{Role: "user", Content: prompt}}, Sample: g*1000 + i}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return Member{}, nil, err
	}
	key, reqHash := childKey{g, i}, digest(append(reqJSON, ev.OptimizerModels...))
	if m, inv, ok, err := ev.replay(key, reqHash); ok || err != nil {
		return m, inv, err
	}
	resp, err := ev.Optimizer.Complete(ctx, req)
	if err != nil {
		return Member{}, nil, fmt.Errorf("evolve: optimizer: %w", err)
	}
	jr := childRecord{Generation: g, Child: i, Request: reqHash, Step: step, Parents: parents,
		Usage: RoleUsage{Calls: 1, TokensIn: resp.Usage.PromptTokens, TokensOut: resp.Usage.CompletionTokens, CostUSD: costOf(ev.Optimizer, resp.Usage)}}
	ev.addOptimizerUsage(jr.Usage)
	src, _ := guideline.FromReply(resp.Message.Content)
	rec, t, err := ev.Registry.Put(guideline.Record{Kind: guideline.KindHistory, Parent: a.ID, Parents: parentsList(parents), Round: g, Step: step, Source: llm.RoleOptimizer}, normalizeSource(src))
	if err != nil {
		return Member{}, nil, err
	}
	jr.ID = rec.ID
	var inv *Invalid
	switch {
	case t == nil:
		inv = &Invalid{ID: rec.ID, Parents: parents, Reason: strings.Join(rec.Validation.Problems, "; ")}
	case slices.ContainsFunc(pop, func(m Member) bool { return m.ID == rec.ID }):
		inv = &Invalid{ID: rec.ID, Parents: parents, Reason: "repeats a prompt of the population"}
	default:
		ev.templates[rec.ID] = t
	}
	if inv != nil {
		jr.Rejected = inv.Reason
	}
	if err := ev.record(jr); err != nil {
		return Member{}, nil, err
	}
	if inv != nil {
		return Member{}, inv, nil
	}
	return Member{ID: rec.ID, Step: step, Parents: parents}, nil, nil
}

// normalizeSource ends a prompt with one newline, so a reply that differs
// from its parent only there repeats it.
func normalizeSource(s string) string { return strings.TrimSpace(s) + "\n" }

// parentsList is the registry's Parents: set only for two parents.
func parentsList(ps []string) []string {
	if len(ps) < 2 {
		return nil
	}
	return ps
}

// newLines are the non-blank lines of b that a lacks.
func newLines(b, a string) []string {
	have := map[string]bool{}
	for l := range strings.Lines(a) {
		have[strings.TrimSpace(l)] = true
	}
	var out []string
	for l := range strings.Lines(b) {
		if t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")); t != "" && !have[strings.TrimSpace(l)] && !strings.EqualFold(t, "rules:") {
			out = append(out, t)
		}
	}
	return out
}

// writeSample writes a seeded sample of n valid workflows of wfs (reservoir
// sampling, in file order) to path, or checks that path holds that sample
// when a previous run wrote it; it returns the sample by id.
func writeSample(wfs, path string, n, seed int, lim Limits) (map[string]*Workflow, error) {
	f, err := os.Open(wfs)
	if err != nil {
		return nil, fmt.Errorf("evolve: %w", err)
	}
	defer f.Close()
	// The file is read by run's rule, so damage stops the evolution before
	// it spends anything rather than the export after it.
	total, err := countLines(f, wfs, 0, lim)
	if err != nil {
		return nil, err
	}
	rd := jsonl.NewReader(f, wfs, jsonl.Limits{Line: maxWorkflowLine})
	r := splitmix.New(uint64(seed)*0x9e3779b97f4a7c15 ^ 0x5eed)
	type kept struct {
		at   int
		line []byte
		w    Workflow
	}
	var res []kept
	valid := 0
	for range total {
		line, err := rd.Next()
		if err != nil {
			return nil, changedWhileRead(wfs, err)
		}
		w, err := Parse(line)
		if err != nil {
			continue // invalid lines are run's to report, not the sample's
		}
		k := kept{at: valid, line: bytes.Clone(line), w: w}
		switch {
		case len(res) < n:
			res = append(res, k)
		default:
			if j := r.Intn(valid + 1); j < n {
				res[j] = k
			}
		}
		valid++
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("evolve: %s holds no valid workflow", wfs)
	}
	slices.SortFunc(res, func(a, b kept) int { return cmp.Compare(a.at, b.at) })
	var buf bytes.Buffer
	out := make(map[string]*Workflow, len(res))
	for i := range res {
		buf.Write(res[i].line)
		buf.WriteByte('\n')
		out[res[i].w.ID] = &res[i].w
	}
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return out, atomicfile.WriteFile(path, buf.Bytes(), 0o644)
	case err != nil:
		return nil, err
	case !bytes.Equal(old, buf.Bytes()):
		return nil, fmt.Errorf("%w: %s holds another sample (other workflows, seed or sample size); use another --out", ErrForeignDir, path)
	}
	return out, nil
}

// PrintEvolveSummary writes the lineage and scores by generation.
func PrintEvolveSummary(w io.Writer, s EvolveSummary) {
	if l := report.ModelsLine(s.EmbeddedModel, s.EmbeddedRoles); l != "" {
		fmt.Fprintln(w, l)
	}
	for _, g := range s.Generations {
		fmt.Fprintf(w, "generation %d:\n", g.N)
		for _, m := range g.Members {
			mark := " "
			if m.Elite {
				mark = "*"
			}
			from := "-"
			if len(m.Parents) > 0 {
				from = strings.Join(m.Parents, " x ")
			}
			fmt.Fprintf(w, " %s %-15s %-9s composite %.4f  success %.3f  fidelity %.3f  compression %.3f  from %s\n",
				mark, m.ID, m.Step, m.Scores.Composite, m.Scores.Success, m.Scores.Fidelity, m.Scores.Compression, from)
		}
		reasons := map[string]int{}
		for _, r := range g.Rejected {
			reasons[r.Reason]++
		}
		for _, r := range slices.Sorted(maps.Keys(reasons)) {
			fmt.Fprintf(w, "   %d children rejected: %s\n", reasons[r], r)
		}
	}
	fmt.Fprintf(w, "best: %s (composite %.4f, success %.3f) -> %s\n", s.Best.ID, s.Best.Scores.Composite, s.Best.Scores.Success, s.BestFile)
}
