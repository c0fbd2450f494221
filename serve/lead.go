package serve

import (
	"math"
	"sync"
	"time"
)

// The estimator's smoothing. Each estimate moves fast towards the side
// that makes a summary late (turns coming faster, a summarizer slowing
// down) and slowly back, so one quick summary or one slow turn does not
// make the next summary start too late.
const (
	alphaFast = 0.5
	alphaSlow = 0.2
	// idleGap is a pause between two requests of a session that says
	// nothing about its pace (a user away, a job suspended): the turn
	// interval ignores it.
	idleGap = 5 * time.Minute
	// stretchCap bounds how much one slow turn may count: at most this
	// many times the current interval.
	stretchCap = 4
)

// ewma is an exponentially weighted moving average that rises with rise
// and falls with fall; 0 means no sample yet.
type ewma struct{ v float64 }

func (e *ewma) add(x, rise, fall float64) {
	switch {
	case e.v == 0:
		e.v = x
	case x > e.v:
		e.v += rise * (x - e.v)
	default:
		e.v += fall * (x - e.v)
	}
}

// growth is how fast one conversation grows: tokens and seconds per turn,
// from the requests seen so far.
type growth struct {
	at            time.Time
	tokens, turns int
	perTurn       ewma // tokens per turn
	interval      ewma // seconds per turn
}

// observe records a request of tokens tokens and turns turns at now.
func (g *growth) observe(now time.Time, tokens, turns int) {
	if g.at.IsZero() || turns < g.turns || tokens < g.tokens {
		// First request, or the client edited or forked its history.
		*g = growth{at: now, tokens: tokens, turns: turns}
		return
	}
	n := turns - g.turns
	if n == 0 {
		return // a retry or a second request of the same turn
	}
	// More tokens a turn also makes a summary late: that side moves fast.
	g.perTurn.add(float64(tokens-g.tokens)/float64(n), alphaFast, alphaSlow)
	dt := now.Sub(g.at)
	if dt < idleGap {
		iv := dt.Seconds() / float64(n)
		if g.interval.v > 0 {
			iv = min(iv, stretchCap*g.interval.v)
		}
		g.interval.add(iv, alphaSlow, alphaFast)
	}
	g.at, g.tokens, g.turns = now, tokens, turns
}

// leadTokens is how much the conversation is expected to grow from now
// until a summary started at the next request lands: the turns that come
// while it is computed, and the next one. A summary must start now when
// the view plus this passes the threshold. ok is false while there is no
// estimate.
func (g *growth) leadTokens(latency time.Duration) (n int, ok bool) {
	if g.perTurn.v <= 0 || g.interval.v <= 0 || latency <= 0 {
		return 0, false
	}
	turns := math.Floor(latency.Seconds()/g.interval.v) + 1
	return int(turns * g.perTurn.v), true
}

// linkPrior is what is known of a link before it has made a summary: its
// configured estimate, and its timeout, which no estimate passes (the
// chain abandons the link then).
type linkPrior struct {
	name            string
	expect, timeout time.Duration
}

// linkPriors are the priors of the configured links, in chain order.
func linkPriors(c Compressors) []linkPrior {
	var out []linkPrior
	for _, l := range []struct {
		name string
		cfg  Link
	}{{LinkStudent, c.Student}, {LinkTeacher, c.Teacher}} {
		if l.cfg.BaseURL != "" {
			out = append(out, linkPrior{name: l.name, expect: l.cfg.Latency, timeout: l.cfg.Timeout})
		}
	}
	return out
}

// pace keeps the estimates the lead time is made of: per session its
// growth, per link the time a summary takes.
type pace struct {
	now    func() time.Time
	ttl    time.Duration
	max    int
	priors []linkPrior

	mu       sync.Mutex
	sessions map[string]*growth
	links    map[string]*ewma // seconds per summary
	// last is the link that made the last summary: the next is expected
	// from it.
	last  string
	swept time.Time
}

func newPace(now func() time.Time, ttl time.Duration, max int, priors ...linkPrior) *pace {
	return &pace{now: now, ttl: ttl, max: max, priors: priors, sessions: map[string]*growth{}, links: map[string]*ewma{}}
}

// observe records a request of session id and returns the tokens it will
// grow by while the next summary is computed (ok false: not known yet).
func (p *pace) observe(id string, tokens, turns int) (lead int, ok bool) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.sessions[id]
	if g == nil {
		p.sweepLocked(now)
		g = &growth{}
		p.sessions[id] = g
	}
	g.observe(now, tokens, turns)
	return g.leadTokens(p.latencyLocked())
}

// summarized records that link made a summary in took.
func (p *pace) summarized(link string, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.links[link]
	if e == nil {
		e = &ewma{}
		p.links[link] = e
	}
	e.add(took.Seconds(), alphaFast, alphaSlow)
	p.last = link
}

// latency is the time the next summary is expected to take (0: unknown:
// no link has made one and none has a prior).
func (p *pace) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latencyLocked()
}

func (p *pace) latencyLocked() time.Duration {
	name := p.last
	if name == "" && len(p.priors) > 0 {
		name = p.priors[0].name // the chain starts there
	}
	var d, bound time.Duration
	for _, pr := range p.priors {
		if pr.name == name {
			d, bound = pr.expect, pr.timeout
		}
	}
	if e := p.links[name]; e != nil {
		d = time.Duration(e.v * float64(time.Second))
	}
	if bound > 0 {
		d = min(d, bound)
	}
	return d
}

// sweepLocked drops sessions not seen for ttl, at most once a ttl, and
// those idle when max are kept, so the map holds the live sessions only.
// A session dropped too soon costs two requests of estimates.
func (p *pace) sweepLocked(now time.Time) {
	full := len(p.sessions) >= p.max
	if !full && now.Sub(p.swept) < p.ttl {
		return
	}
	p.swept = now
	for id, g := range p.sessions {
		if now.Sub(g.at) > p.ttl || (full && now.Sub(g.at) > idleGap) {
			delete(p.sessions, id)
		}
	}
	if len(p.sessions) >= p.max {
		clear(p.sessions)
	}
}
