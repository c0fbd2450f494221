package pipeline

import (
	"context"
	"testing"

	"github.com/ctxopt/ctxopt/guideline"
)

// A whole UT+CO round on the embedded model parses and validates every
// candidate once: the winner is not compiled again when it is scored,
// selected or used as the next parent, and a re-run that skips every stage
// compiles each guideline it uses at most once.
func TestWinnerValidatedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a UT+CO round")
	}
	// Six tasks give each step its candidates as twelve did: validations
	// are counted per candidate, whatever the tasks.
	job := smallJob(t, 6, "")
	job.Eval.Disabled, job.Distill.Enabled = true, false
	// argmax takes a valid candidate even when it does not beat its
	// parent, so both steps have a winner to check.
	job.Optimize.Selection = guideline.SelectArgmax
	dir := t.TempDir()
	p, err := newRunner(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	puts := countPuts(p)
	sum, err := p.run()
	p.rt.Close()
	if err != nil {
		t.Fatal(err)
	}
	winners := 0
	for _, d := range []guideline.Decision{sum.Rounds[0].UT, sum.Rounds[0].CO} {
		if !d.KeptParent {
			winners++
			t.Logf("%s winner %s: validated %d time(s)", d.Step, d.Chosen, puts.validations(d.Chosen))
		}
		for _, c := range d.Candidates {
			if c.ID == "" {
				continue
			}
			if n := puts.validations(c.ID); n != 1 {
				t.Errorf("%s candidate %d (%s, chosen %v): validated %d times, want 1", d.Step, c.K, c.ID, c.ID == d.Chosen, n)
			}
		}
	}
	if winners != 2 {
		t.Fatalf("%d of 2 steps chose a candidate: %+v", winners, sum.Rounds)
	}
	if n := puts.validations(sum.SelectedGuideline); n != 1 {
		t.Errorf("selected guideline %s validated %d times, want 1", sum.SelectedGuideline, n)
	}

	again, err := newRunner(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	againPuts := countPuts(again)
	defer again.rt.Close()
	if _, err := again.run(); err != nil {
		t.Fatal(err)
	}
	// The steps are skipped: each winner is compiled once, from the
	// registry, to be the next parent.
	for _, d := range []guideline.Decision{sum.Rounds[0].UT, sum.Rounds[0].CO} {
		if n := againPuts.validations(d.Chosen); n != 1 {
			t.Errorf("re-run: %s winner %s validated %d times, want 1", d.Step, d.Chosen, n)
		}
	}
}

// putCounter counts, by content id, the sources Put validated: every Put
// validates its source, PutTemplate does not.
type putCounter struct {
	registry
	n map[string]int
}

func (c *putCounter) Put(rec guideline.Record, src string) (guideline.Record, *guideline.Template, error) {
	rec, t, err := c.registry.Put(rec, src)
	c.n[rec.ID]++
	return rec, t, err
}

func (c *putCounter) validations(id string) int { return c.n[id] }

// countPuts makes p's registry count the validations of its Puts.
func countPuts(p *runner) *putCounter {
	c := &putCounter{registry: p.reg, n: map[string]int{}}
	p.reg = c
	return c
}
