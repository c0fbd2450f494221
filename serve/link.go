package serve

import (
	"fmt"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
)

// link is one compressor endpoint of the chain: it runs compress's
// guideline strategy (the compressors the rollouts ran when the guideline
// was optimized) with its timeout and breaker.
type link struct {
	name    string
	model   compress.Completer
	tok     *llm.Tokenizer
	timeout time.Duration
	br      *breaker

	mu sync.Mutex
	// built holds one strategy per guideline id: a strategy is bound to
	// its guideline, and a swap builds the new one on first use.
	built map[string]*compress.Strategy
}

func newLink(name string, model compress.Completer, tok *llm.Tokenizer, timeout time.Duration, br *breaker) *link {
	return &link{name: name, model: model, tok: tok, timeout: timeout, br: br, built: map[string]*compress.Strategy{}}
}

// strategy returns the guideline strategy of g on this link. Its
// thresholds are 1 token: serve decides when to compress (threshold,
// trigger) and calls the strategy only then.
func (l *link) strategy(g *activeGuideline) (*compress.Strategy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.built[g.id]; ok {
		return s, nil
	}
	d := compress.Deps{Compressor: l.model, Tokenizer: l.tok, HistoryThreshold: 1, ObservationThreshold: 1}
	p := &compress.Prompt{ID: g.id, Template: g.tmpl}
	if g.kind == guideline.KindHistory {
		d.History = p
	} else {
		d.Observation = p
	}
	s, err := compress.New(compress.Guideline, nil, d)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", l.name, err)
	}
	if len(l.built) >= 16 {
		clear(l.built) // old guidelines are not coming back often
	}
	l.built[g.id] = s
	return s, nil
}

// historyInput is the compress.Input that folds History[covered:cut] into
// summary: compress's summarizer keeps the last turn of what it is given,
// so it is given the history up to the end of the turn that opens at cut.
func historyInput(task string, plan []string, hist []llm.Message, summary string, covered, cut, context int) compress.Input {
	end := len(hist)
	for i := cut + 1; i < len(hist); i++ {
		if compress.OpensTurn(hist[i].Role) {
			end = i
			break
		}
	}
	h := hist[:end]
	steps := len(compress.TurnStarts(end, func(i int) string { return h[i].Role }))
	return compress.Input{Step: steps, Task: task, Plan: plan, History: h, Summary: summary, Covered: covered, ContextTokens: context}
}
