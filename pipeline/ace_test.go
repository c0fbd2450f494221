package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
)

// aceJob is jobs/demo.yaml with optimizer ace, cut to train tasks and
// with its own cache, no evaluation and no export.
func aceJob(t testing.TB, train int) *Job {
	t.Helper()
	src := mustRead(t, "../jobs/demo.yaml")
	src = strings.Replace(src, "path: .cache/llm.db", "path: "+filepath.Join(t.TempDir(), "llm.db"), 1)
	src = strings.Replace(src, "optimize:\n", "optimizer: ace\nace:\n  epochs: 2\n  max_tokens: 512\noptimize:\n", 1)
	j, err := ParseJob("demo-ace.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j.Env.TrainLimit, j.Env.TestLimit = train, 4
	j.Eval.Disabled, j.Distill.Enabled = true, false
	return j
}

// aceRunner prepares a run of j up to its baselines.
func aceRunner(t *testing.T, j *Job) (p *runner, base *stagedRollout) {
	t.Helper()
	p, err := newRunner(context.Background(), j, t.TempDir(), RunOptions{NoReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.rt.Close() })
	sum, seed, err := p.begin()
	if err != nil {
		t.Fatal(err)
	}
	if base, _, err = p.baselines(sum, seed); err != nil {
		t.Fatal(err)
	}
	return p, base
}

// playbookWith registers the seed playbook with bullets added and rolls
// it out on the train split.
func playbookWith(t *testing.T, p *runner, name string, add ...guideline.Op) (compiled, *stagedRollout) {
	t.Helper()
	pb, err := guideline.NewPlaybook(p.kind, p.seedSrc)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range pb.Apply(0, add) {
		if a.Rejected != "" {
			t.Fatal(a.Rejected)
		}
	}
	c, err := p.putPlaybook(guideline.Record{Step: guideline.StepSeed, Source: "test"}, pb)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := p.rollout(name, compress.Guideline, c.g, p.train)
	if err != nil {
		t.Fatal(err)
	}
	return c, cur
}

// shuffleWords shuffles the words of each line, seeded.
func shuffleWords(lines []string, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]string, len(lines))
	for i, l := range lines {
		w := strings.Fields(l)
		rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
		out[i] = strings.Join(w, " ")
	}
	return out
}

// TestACEAblations are issue 24's ablations on the embedded model; they
// check mechanics, not quality.
func TestACEAblations(t *testing.T) {
	if testing.Short() {
		t.Skip("rollouts")
	}
	p, base := aceRunner(t, aceJob(t, 24))
	t.Run("empty feedback applies no operation", func(t *testing.T) {
		parent, _ := playbookWith(t, p, "t-keep", guideline.Op{Type: guideline.OpAdd, Section: "keep", Content: "Copy every fact sentence word for word."})
		_, pb, err := p.reg.Playbook(parent.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		var dec guideline.ACERound
		tags, err := p.reflect(1, pb, nil)
		if err != nil {
			t.Fatal(err)
		}
		cand, err := p.curate(1, pb, nil, &dec)
		if err != nil {
			t.Fatal(err)
		}
		if len(tags) != 0 || len(dec.Ops) != 0 || cand.Source() != pb.Source() {
			t.Errorf("no feedback: %d tags, %d operations, playbook changed %v", len(tags), len(dec.Ops), cand.Source() != pb.Source())
		}
		// A whole round: with one train task, held out to gate the
		// batch, no task is left to give feedback.
		q, qbase := aceRunner(t, aceJob(t, 1))
		qparent, qcur := playbookWith(t, q, "t-keep", guideline.Op{Type: guideline.OpAdd, Section: "keep", Content: "Copy every fact sentence word for word."})
		next, rd, err := q.aceRound(1, qparent, qbase, qcur)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round with %d feedback records: %d tags, %d operations, kept parent %v (%s)", rd.Feedback, len(rd.Tags), len(rd.Ops), rd.KeptParent, rd.Reason)
		if rd.Feedback != 0 || len(rd.Tags) != 0 || len(rd.Ops) != 0 || !rd.KeptParent || next.rec.ID != qparent.rec.ID {
			t.Errorf("round %+v: want no feedback, no tag, no operation, the parent kept", rd)
		}
	})
	t.Run("a bullet that drops facts is blamed and removed within two rounds", func(t *testing.T) {
		parent, cur := playbookWith(t, p, "t-harm", guideline.Op{Type: guideline.OpAdd, Section: "style", Content: "Paraphrase the facts to save space."})
		const id = "style-00001"
		for r := 1; r <= 2; r++ {
			next, dec, err := p.aceRound(r, parent, base, cur)
			if err != nil {
				t.Fatal(err)
			}
			_, pb, err := p.reg.Playbook(next.rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			harmful := slices.ContainsFunc(dec.Tags, func(g guideline.Tag) bool { return g.ID == id && g.Tag == guideline.TagHarmful })
			b, still := pb.Get(id)
			t.Logf("round %d: %d feedback, tagged harmful %v, %d operations, batch kept %v, bullet left %v %+v", r, dec.Feedback, harmful, len(dec.Ops), dec.BatchKept, still, b)
			if !harmful {
				t.Fatalf("round %d: %s was not tagged harmful: tags %+v", r, id, dec.Tags)
			}
			if !still || b.Content != "Paraphrase the facts to save space." {
				return // removed or rewritten
			}
			parent = next
			if cur, err = p.rollout(fmt.Sprintf("t-harm-r%d", r), compress.Guideline, next.g, p.train); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("%s is still in the playbook after two rounds", id)
	})
	t.Run("shuffled feedback gains nothing over the starting playbook", func(t *testing.T) {
		seed, cur := playbookWith(t, p, "t-seed")
		_, pb, err := p.reg.Playbook(seed.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		var d guideline.ACERound
		tasks, fb, err := p.aceFeedback(1, t.TempDir(), nil, base, cur, &d)
		if err != nil {
			t.Fatal(err)
		}
		if len(fb) == 0 {
			t.Fatal("no feedback to shuffle")
		}
		gain := func(name string, fb []contrastive.Feedback) guideline.Paired {
			var dec guideline.ACERound
			cand, err := p.curate(1, pb, fb, &dec)
			if err != nil {
				t.Fatal(err)
			}
			c, err := p.putPlaybook(guideline.Record{Parent: seed.rec.ID, Round: 1, Step: guideline.StepACE, Source: "test"}, cand)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.rollout(name, compress.Guideline, c.g, tasks)
			if err != nil {
				t.Fatal(err)
			}
			return guideline.Compare(guideline.Pick(res.Outcomes, tasks), guideline.Pick(cur.Outcomes, tasks), uint64(p.job.Seed))
		}
		shuffled := slices.Clone(fb)
		for i := range shuffled {
			f := &shuffled[i]
			f.MissingFacts, f.Recommendations, f.Rules = shuffleWords(f.MissingFacts, 1), shuffleWords(f.Recommendations, 2), shuffleWords(f.Rules, 3)
		}
		real, shuf := gain("t-real", fb), gain("t-shuffled", shuffled)
		t.Logf("on %d held-out tasks, success minus the starting playbook's: feedback as analysed %+.3f [%+.3f, %+.3f]; shuffled %+.3f [%+.3f, %+.3f]",
			len(tasks), real.SuccessDiff, real.CILow, real.CIHigh, shuf.SuccessDiff, shuf.CILow, shuf.CIHigh)
		if shuf.SuccessDiff > 0 || shuf.CILow > 0 {
			t.Errorf("shuffled feedback gained %+.3f [%+.3f, %+.3f] over the starting playbook", shuf.SuccessDiff, shuf.CILow, shuf.CIHigh)
		}
	})
}

// TestACEBudgetAddOnlyCurator drives ten rounds of a curator that only
// adds bullets, far more than fit: the playbook's tokens never exceed the
// budget.
func TestACEBudgetAddOnlyCurator(t *testing.T) {
	tok, err := llm.NewTokenizer(llm.DefaultEncoding)
	if err != nil {
		t.Fatal(err)
	}
	spec := ACESpec{}.WithDefaults()
	spec.MaxTokens = 300
	pb, err := guideline.NewPlaybook(guideline.KindHistory, mustRead(t, "../guideline/testdata/history_seed.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	most, evicted := 0, 0
	for r := 1; r <= 10; r++ {
		var ops []guideline.Op
		for i := range 12 {
			ops = append(ops, guideline.Op{Type: guideline.OpAdd, Section: "keep",
				Content: fmt.Sprintf("Keep rule %d of round %d: the %s of every entity named in question %d.", i, r, []string{"capital", "founder", "currency", "river"}[i%4], r*100+i)})
		}
		var dec guideline.ACERound
		next, err := applyBatch(r, pb, ops, spec, guideline.LexicalVectors, tok.Count, &dec)
		if err != nil {
			t.Fatal(err)
		}
		n := next.Tokens(tok.Count)
		most, evicted = max(most, n), evicted+len(dec.Evicted)
		if n > spec.MaxTokens {
			t.Fatalf("round %d: %d tokens, budget %d", r, n, spec.MaxTokens)
		}
		if _, err := next.Compile(); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		pb = next
	}
	t.Logf("ADD-only curator, 10 rounds of 12 bullets: max playbook tokens %d of a %d budget, %d bullets evicted, %d left", most, spec.MaxTokens, evicted, len(pb.Bullets))
	if evicted == 0 {
		t.Error("nothing was evicted: the test never pressed the budget")
	}
}

// TestACEOnlineWindows runs optimizer ace online: one round per Every
// train trajectories, each reading feedback from its own window only.
// Windows of four (of eight train tasks) show it as windows of eight did:
// each round still reads feedback.
func TestACEOnlineWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("rollouts")
	}
	j := aceJob(t, 8)
	j.ACE.Mode, j.ACE.Every = ACEOnline, 4
	sum, err := Run(context.Background(), j, t.TempDir(), RunOptions{NoReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.ACERounds) != 2 {
		t.Fatalf("%d rounds, want 8/4 = 2", len(sum.ACERounds))
	}
	for i, r := range sum.ACERounds {
		t.Logf("round %d: window %v, feedback from %v, %d operations, batch kept %v", r.N, r.Window, r.FeedbackTasks, len(r.Ops), r.BatchKept)
		if len(r.Window) != 4 || (i > 0 && r.Window[0] == sum.ACERounds[0].Window[0]) {
			t.Errorf("round %d window %v", r.N, r.Window)
		}
		if len(r.FeedbackTasks) == 0 {
			t.Errorf("round %d read no feedback: nothing to check against its window", r.N)
		}
		for _, id := range r.FeedbackTasks {
			if !slices.Contains(r.Window, id) || slices.Contains(r.Tasks, id) {
				t.Errorf("round %d: feedback from %s, outside its window or a selection task", r.N, id)
			}
		}
	}
}

// An ACE run that starts from a playbook (a promoted one, in the nightly
// loop) keeps its bullets and counters.
func TestACEStartsFromAPlaybook(t *testing.T) {
	p, err := newRunner(context.Background(), aceJob(t, 2), t.TempDir(), RunOptions{NoReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.rt.Close()
	pb, err := guideline.NewPlaybook(p.kind, p.seedSrc)
	if err != nil {
		t.Fatal(err)
	}
	pb.Apply(3, []guideline.Op{{Type: guideline.OpAdd, Section: "keep", Content: "Copy every fact sentence word for word."}})
	pb.ApplyTags(4, []guideline.Tag{{ID: "keep-00001", Tag: guideline.TagHelpful}})
	p.seedSrc = pb.Source()
	c, err := p.registerSeedPlaybook()
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := p.reg.Playbook(c.rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.src != pb.Source() || len(got.Bullets) != 1 || got.Bullets[0].Helpful != 1 || got.Next != 2 {
		t.Errorf("seed playbook %+v from %q", got, pb.Source())
	}
}
