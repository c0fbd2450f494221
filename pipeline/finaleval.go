package pipeline

import (
	"fmt"
	"path/filepath"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
)

// FinalEval is the held-out evaluation (DESIGN step 7) in DIR/eval: the
// test split, never used for selection, through the same eval package as
// `optimize eval`.
type FinalEval struct {
	Dir string `json:"dir"`
	eval.Summary
	Comparisons []eval.Comparison `json:"comparisons"`
}

// Names of the final evaluation's candidates; every one is compared with
// no compression (the reference), and the selected guideline's verdict is
// judged against the promoted one when the registry has one.
const (
	evalNone      = "none"
	evalPrompting = "prompting"
	evalSelected  = "selected"
	evalPromoted  = "promoted"
)

// evalDir is where `optimize run` keeps its final evaluation.
func evalDir(runDir string) string { return filepath.Join(runDir, evalDirName) }

// evalDirName is the run directory's evaluation folder.
const evalDirName = "eval"

// evaluate rolls no compression, the starting and the selected guideline
// out on the test split.
func (p *runner) evaluate(seed, selected compiled) (*FinalEval, error) {
	test, err := p.rt.Tasks("test")
	if err != nil {
		return nil, err
	}
	cands, uses, err := p.evalCandidates(seed, selected)
	if err != nil {
		return nil, err
	}
	fps := make([]rollout.Fingerprint, len(cands))
	for i, c := range cands {
		fps[i] = c.Agent.Fingerprint()
	}
	dir := evalDir(p.dir)
	opt := eval.Options{
		Split: "test", Samples: 1, Seed: p.job.Seed, Reference: evalNone, Concurrency: p.job.Rollout.Concurrency,
		TaskSet: p.rt.taskSet("test", test),
	}
	opt.EmbeddedModel, opt.EmbeddedRoles = report.Embedded(uses)
	// The agents' fingerprints name the environment's settings and the
	// models (rollout.Fingerprint), so they are not listed again; the
	// concurrency changes no result.
	key := opt
	key.Concurrency = 0
	inputs := map[string]any{"agents": fps, "tasks": tasksHash(test), "options": key}
	res, err := stage(p.dir, p.meter, stageSpec[*eval.Result]{
		name: "eval", inputs: inputs, store: p.store, owned: []string{evalDirName},
		run: func(string) (*eval.Result, map[string]float64, error) {
			r, err := eval.Run(p.ctx, cands, test, dir, opt)
			if err != nil {
				return nil, nil, err
			}
			return r, map[string]float64{"tasks": float64(len(test)), "candidates": float64(len(cands))}, nil
		},
		// The evaluation keeps its own files in DIR/eval.
		load: func(string) (*eval.Result, error) { return eval.Load(dir) },
	})
	if err != nil {
		return nil, err
	}
	return &FinalEval{Dir: dir, Summary: res.Summary, Comparisons: res.Comparisons}, nil
}

// evalCandidates are the final evaluation's candidates, each with the
// roles it calls, and the uses of them all: no compression, the starting
// and the selected guideline, and the registry's promoted guideline when it
// is neither.
func (p *runner) evalCandidates(seed, selected compiled) ([]eval.Candidate, []report.Use, error) {
	type arm struct {
		name, spec string
		s          compress.Name
		g          *compress.Prompt
	}
	arms := []arm{
		{evalNone, string(compress.None), compress.None, nil},
		{evalPrompting, string(compress.Prompting), compress.Prompting, seed.g},
		{evalSelected, fmt.Sprintf("%s,guideline=%s", compress.Guideline, selected.rec.ID), compress.Guideline, selected.g},
	}
	id, src, err := PromotedGuideline(filepath.Join(p.dir, GuidelinesDir), p.kind)
	if err != nil {
		return nil, nil, err
	}
	if id != "" && id != seed.rec.ID && id != selected.rec.ID {
		t, err := Compile(p.kind, src, "registry:"+id)
		if err != nil {
			return nil, nil, err
		}
		arms = append(arms, arm{evalPromoted, fmt.Sprintf("%s,guideline=%s", compress.Guideline, id), compress.Guideline, promptOf(t)})
	}
	cands := make([]eval.Candidate, 0, len(arms))
	var uses []report.Use
	for _, c := range arms {
		agent, err := p.newAgent(c.s, c.g)
		if err != nil {
			return nil, nil, err
		}
		cand := eval.Candidate{Spec: eval.Spec{Name: c.name, Text: c.spec, Strategy: c.s}, Agent: agent, GuidelineTokens: p.rt.promptTokens(c.g)}
		u := p.rt.agentUses(agent.Strategy, "")
		cand.EmbeddedModel, cand.EmbeddedRoles = report.Embedded(u)
		cands, uses = append(cands, cand), append(uses, u...)
	}
	return cands, uses, nil
}

// PromotedGuideline returns the id and source of the guideline of kind
// promoted in the registry in dir ("" when none is).
func PromotedGuideline(dir string, kind guideline.Kind) (id, src string, err error) {
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		return "", "", err
	}
	recs, err := reg.List()
	if err != nil {
		return "", "", fmt.Errorf("promoted guideline: %w", err)
	}
	for _, r := range recs {
		if r.Promoted && r.Kind == kind {
			_, src, err := reg.Get(r.ID)
			return r.ID, src, err
		}
	}
	return "", "", nil
}
