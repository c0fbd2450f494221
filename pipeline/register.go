package pipeline

import (
	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
)

// compiled is a registered guideline; src and g are empty when it failed
// validation.
type compiled struct {
	rec guideline.Record
	src string
	g   *compress.Prompt
}

// registry is what a run does with its guideline registry
// (*guideline.Registry).
type registry interface {
	Put(rec guideline.Record, src string) (guideline.Record, *guideline.Template, error)
	PutTemplate(rec guideline.Record, t *guideline.Template) (guideline.Record, error)
	Get(id string) (guideline.Record, string, error)
	Score(id string, scores map[string]float64) (guideline.Record, error)
	PutPlaybook(rec guideline.Record, pb *guideline.Playbook) (guideline.Record, *guideline.Template, error)
	Playbook(id string) (guideline.Record, *guideline.Playbook, error)
}

// registerSeed registers the job's starting guideline of the kind
// optimized, compiled by newRunner.
func (p *runner) registerSeed() (compiled, error) {
	return p.register(p.seedSrc, guideline.Record{Kind: p.kind, Step: guideline.StepSeed, Source: p.seedOrigin})
}

// register stores src in the registry with rec's lineage. A source this
// invocation compiled before is stored as it is; any other is validated,
// repaired and compiled by the registry, once.
func (p *runner) register(src string, rec guideline.Record) (compiled, error) {
	t := p.tmpls[guideline.ID(p.kind, src)]
	var err error
	if t != nil {
		rec, err = p.reg.PutTemplate(rec, t)
	} else if rec, t, err = p.reg.Put(rec, src); t != nil {
		p.keep(src, t)
	}
	if err != nil {
		return compiled{}, err
	}
	c := compiled{rec: rec}
	if t != nil {
		c.src, c.g = t.Source(), promptOf(t)
	}
	return c, nil
}

// keep remembers t, compiled from src.
func (p *runner) keep(src string, t *guideline.Template) {
	p.tmpls[guideline.ID(p.kind, src)] = t
	p.tmpls[t.ID()] = t
}
