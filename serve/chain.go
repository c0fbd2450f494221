package serve

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
)

// Links of the fallback chain, in order.
const (
	LinkStudent    = "student"
	LinkTeacher    = "teacher"
	LinkTruncation = "truncation"
	// BackendFolded is no link: X-Ctxopt-Backend says it of a request sent
	// while its summary was late, with the previous summary (if any) and
	// the turns since, older tool outputs folded and no turn left out (a
	// request that had to leave turns out says truncation).
	BackendFolded = "folded"
)

// Reasons a link was passed over, as counted in the fallback metric.
const (
	reasonOpen    = "breaker_open"
	reasonError   = "error"
	reasonTimeout = "timeout"
	reasonInvalid = "invalid"
)

// breaker is a consecutive-failure circuit breaker: after failures in a
// row it opens for cooldown, then lets one trial call through (half-open).
type breaker struct {
	failures int
	cooldown time.Duration
	now      func() time.Time

	mu       sync.Mutex
	fails    int
	openTill time.Time
	trial    bool
}

func newBreaker(failures int, cooldown time.Duration) *breaker {
	return &breaker{failures: failures, cooldown: cooldown, now: time.Now}
}

// allow reports whether a call may go through.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fails < b.failures {
		return true
	}
	if b.now().Before(b.openTill) || b.trial {
		return false
	}
	b.trial = true
	return true
}

// open reports whether the breaker is open or half-open: failures in a
// row that no success has ended yet.
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fails >= b.failures
}

func (b *breaker) record(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	if ok {
		b.fails = 0
		return
	}
	b.fails++
	if b.fails >= b.failures {
		b.openTill = b.now().Add(b.cooldown)
	}
}

// attempt is one link tried, as reported in the compress API's chain.
type attempt struct {
	Link   string `json:"link"`
	Result string `json:"result"` // "ok" or a reason
	Detail string `json:"detail,omitempty"`
}

// chain runs links in order until one returns a valid result; truncation,
// which never fails, ends it.
type chain struct {
	links []*link
	// truncation is compress's FIFO keeping the last turn: system, first
	// user message and the last turns stay, the rest is dropped.
	truncation compress.History
	tok        *llm.Tokenizer
	m          *metrics
}

// run tries the links from first ("" for all) with call, which returns
// an error for a failed or invalid result, then truncation.
func (ch *chain) run(ctx context.Context, first string, call func(ctx context.Context, l *link) error) (string, []attempt) {
	var tried []attempt
	started := first == ""
	for _, l := range ch.links {
		if !started && l.name != first {
			continue
		}
		started = true
		if !l.br.allow() {
			tried = append(tried, attempt{Link: l.name, Result: reasonOpen})
			ch.m.fallbacks.WithLabelValues(l.name, reasonOpen).Inc()
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, l.timeout)
		t0 := time.Now()
		err := call(lctx, l)
		cancel()
		ch.m.compressorSeconds.WithLabelValues(l.name).Observe(time.Since(t0).Seconds())
		if err == nil {
			l.br.record(true)
			tried = append(tried, attempt{Link: l.name, Result: "ok"})
			return l.name, tried
		}
		if ctx.Err() != nil {
			// The caller went away: not the link's fault.
			tried = append(tried, attempt{Link: l.name, Result: reasonError, Detail: ctx.Err().Error()})
			break
		}
		reason := reasonError
		switch {
		case errors.Is(err, compress.ErrInvalidSummary):
			reason = reasonInvalid
			rule := compress.RuleOf(err)
			ch.m.invalid.WithLabelValues(l.name, rule).Inc()
			slog.Warn("compressor answer rejected", "link", l.name, "reason", err, "rule", rule)
		case errors.Is(err, context.DeadlineExceeded):
			reason = reasonTimeout
		}
		l.br.record(false)
		tried = append(tried, attempt{Link: l.name, Result: reason, Detail: err.Error()})
		ch.m.fallbacks.WithLabelValues(l.name, reason).Inc()
	}
	tried = append(tried, attempt{Link: LinkTruncation, Result: "ok"})
	return LinkTruncation, tried
}

// summarize folds in.History[in.Covered:] but its last turn into a summary
// with the first link that gives a valid one, else truncates.
func (ch *chain) summarize(ctx context.Context, in compress.Input, g *activeGuideline, first string) (compress.Output, string, []attempt) {
	var out compress.Output
	name, tried := ch.run(ctx, first, func(ctx context.Context, l *link) error {
		s, err := l.strategy(g)
		if err != nil {
			return err
		}
		if out, err = s.History.CompressHistory(ctx, in); err != nil {
			return err
		}
		return compress.CheckSummary(ch.tok, in, out, g.tmpl.SummaryContract())
	})
	if name == LinkTruncation {
		var err error
		if out, err = ch.truncation.CompressHistory(ctx, in); err != nil {
			// FIFO only renders the task message; keep what was covered.
			out = compress.Output{Summary: in.Summary, Covered: in.Covered}
		}
	}
	return out, name, tried
}

// refine compresses an observation with the first link that gives a valid
// result, else cuts it to target tokens.
func (ch *chain) refine(ctx context.Context, in compress.ObservationInput, g *activeGuideline, first string, target int) (string, *compress.Event, string, []attempt) {
	var text string
	var ev *compress.Event
	name, tried := ch.run(ctx, first, func(ctx context.Context, l *link) error {
		s, err := l.strategy(g)
		if err != nil {
			return err
		}
		if text, ev, err = s.Observation.CompressObservation(ctx, in); err != nil {
			return err
		}
		return compress.CheckRefined(ch.tok, in.Observation, text)
	})
	if name == LinkTruncation {
		text, ev = ch.cut(in.Observation, target), nil
	}
	return text, ev, name, tried
}

// cut keeps the longest prefix of s, at a line or word end, within target
// tokens.
func (ch *chain) cut(s string, target int) string {
	if ch.tok.Count(s) <= target {
		return s
	}
	lo, hi := 0, len(s)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ch.tok.Count(s[:mid]) <= target {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	out := s[:lo]
	if i := strings.LastIndexAny(out, "\n "); i > len(out)/2 {
		out = out[:i]
	}
	return strings.ToValidUTF8(out, "")
}

// open names the links whose breaker is open, in chain order.
func (ch *chain) open() []string {
	var names []string
	for _, l := range ch.links {
		if l.br.open() {
			names = append(names, l.name)
		}
	}
	return names
}

// has reports whether the chain has a link named name.
func (ch *chain) has(name string) bool {
	for _, l := range ch.links {
		if l.name == name {
			return true
		}
	}
	return false
}
