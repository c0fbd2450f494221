package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
)

// compactor decides, per proxied request, whether and how to compress the
// conversation, and keeps each conversation's summary ahead of need.
type compactor struct {
	cfg   Compression
	tok   *llm.Tokenizer
	store *store
	chain *chain
	gl    *guidelines
	m     *metrics
	log   *sessionLog

	// bg is the server's lifetime: background summaries stop with it.
	bg context.Context
	wg sync.WaitGroup

	// countAll makes every request's tokens counted (the token budget
	// charges them), not only those of conversations near the trigger.
	countAll bool
	// framing bounds the tokens a counted message adds beyond the bytes
	// of its strings (see belowTrigger).
	framing int
	// pace estimates when the next summary must start (the lead time).
	pace *pace

	mu      sync.Mutex
	pending map[string]*pending
}

// pending is a summary under way.
type pending struct {
	started time.Time
	// cut is the raw index where the messages it leaves out start.
	cut  int
	done chan struct{}
	// late is set once a request waited the whole bound for it: the
	// requests after that do not wait again.
	late atomic.Bool
}

// outcome is what the compactor did to one request.
type outcome struct {
	// body is what to send upstream; nil means the request as it came.
	body       []byte
	compressed bool
	// original and sent are the tokens after the system prompt.
	original, sent int
	guidelineID    string
	link           string
	session        string
	// waited is true when the request waited for a summary.
	waited bool
	// bypassed is true when the summary was not ready within the bound
	// and the request went out truncated.
	bypassed bool
	// uncounted is true when the conversation was too short to need its
	// tokens counted (original and sent are then 0).
	uncounted bool
}

// span is a conversation prepared for compaction: token counts per raw
// message and the offsets of raw messages in the flat llm view.
type span struct {
	conv    *conversation
	id      string
	headTok int
	tok     []int // tokens of raw message i (0 for the head)
	off     []int // llm-view index of raw message i, relative to head
	history []llm.Message
	cuts    []int // raw indexes where turns start (conv.cutPoints)
	cut     int   // raw index where the kept last turns start
}

// sessionID identifies a conversation by its client key and opening
// messages.
func sessionID(conv *conversation, tenant string) string {
	h := sha256.New()
	_, _ = io.WriteString(h, tenant+"\x00"+string(conv.format)+"\x00"+conv.system+"\x00")
	for i := 0; i < conv.head; i++ {
		_, _ = io.WriteString(h, conv.raw[i])
		_, _ = h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:12])
}

func (c *compactor) prepareSpan(conv *conversation, tenant string, keepLast, keepTokens int) *span {
	sp := &span{conv: conv, id: sessionID(conv, tenant), tok: make([]int, len(conv.raw)), off: make([]int, len(conv.raw)+1)}
	for i := 0; i < conv.head; i++ {
		if !isSystem(conv.role(i)) {
			for _, m := range conv.views[i] {
				sp.headTok += c.tok.CountMessage(m)
			}
		}
	}
	n := 0
	for i := conv.head; i < len(conv.raw); i++ {
		sp.off[i] = n
		for _, m := range conv.views[i] {
			sp.tok[i] += c.tok.CountMessage(m)
			n++
		}
	}
	sp.off[len(conv.raw)] = n
	sp.history = conv.flat(conv.head, len(conv.raw))
	sp.cuts = conv.cutPoints()
	sp.cut = sp.keep(conv.head, keepLast, keepTokens)
	return sp
}

// keep is where the kept last turns start: the last keepLast turns, fewer
// when keepTokens (if set) bounds them, never fewer than the last turn, so
// its tool results go verbatim and every older one is summarized.
func (sp *span) keep(head, keepLast, keepTokens int) int {
	i := len(sp.cuts) - keepLast
	if i < 0 && (keepTokens <= 0 || sp.tail(head) <= keepTokens || len(sp.cuts) == 0) {
		return head // all of it is the tail
	}
	i = max(i, 0)
	for keepTokens > 0 && i < len(sp.cuts)-1 && sp.tail(sp.cuts[i]) > keepTokens {
		i++
	}
	return sp.cuts[i]
}

// tail is the token count of raw messages [from, end).
func (sp *span) tail(from int) int {
	n := 0
	for _, t := range sp.tok[from:] {
		n += t
	}
	return n
}

// prefixHash identifies raw messages [head, head+covered).
func (sp *span) prefixHash(covered int) string {
	h := sha256.New()
	for _, r := range sp.conv.raw[sp.conv.head : sp.conv.head+covered] {
		h.Write([]byte(r))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// session returns the conversation's stored summary if it still matches
// the messages sent (a client may edit or fork its history).
func (c *compactor) session(sp *span) session {
	s, ok := c.store.get(sp.id)
	if !ok || s.Covered < 0 || sp.conv.head+s.Covered > len(sp.conv.raw) || sp.prefixHash(s.Covered) != s.PrefixHash {
		return session{ID: sp.id}
	}
	return s
}

// view is the size of the request with s applied.
func (c *compactor) view(sp *span, s session) int {
	if s.Covered == 0 {
		return sp.headTok + sp.tail(sp.conv.head)
	}
	return sp.headTok + c.tok.Count(s.Summary) + sp.tail(sp.conv.head+s.Covered)
}

// prepare applies compression to conv. Once the history passes the
// floor, it starts the next summary in the background when the lead time
// says it is time (see startAt). Past
// the threshold it sends the summary and the turns since (see compose).
// When the summary it needs is not ready, the request waits for it at
// most max_wait, and only when it is expected within the bound; else it
// goes out folded or truncated and the summary serves from the next
// request on. With keep_tokens bounding the verbatim turns (its default),
// folded outputs are the usual shape of a compacted request, so it does
// not wait at all unless even folding would leave turns out.
func (c *compactor) prepare(ctx context.Context, conv *conversation, tenant string) (outcome, error) {
	if conv.uncounted {
		return outcome{session: sessionID(conv, tenant), uncounted: true}, nil
	}
	sp := c.prepareSpan(conv, tenant, c.cfg.KeepLast, c.cfg.keptTokens())
	out := outcome{session: sp.id, original: sp.headTok + sp.tail(conv.head)}
	out.sent = out.original
	if out.original <= c.floor() {
		return out, nil
	}
	lead, known := c.pace.observe(sp.id, out.original, len(sp.cuts))
	s := c.session(sp)
	view := c.view(sp, s)
	if view > c.startAt(lead, known) && sp.cut > conv.head+s.Covered {
		c.background(sp, s, "background")
	}
	if out.original <= c.cfg.Threshold {
		return out, nil
	}
	late := view > c.cfg.Threshold
	// Laid out once: the same layout says whether the request would leave
	// turns out (the one case worth a wait when keep_tokens bounds the
	// verbatim turns) and is what it sends when it does not wait.
	var f folding
	var body []byte
	var err error
	wait := late && c.cfg.keptTokens() == 0
	if !wait {
		f, body, err = c.plan(sp, s)
		wait = late && (err != nil || f.truncated(sp, s))
	}
	if wait {
		out.waited = c.await(ctx, sp, s)
		// The summary may also have landed since s was read.
		s = c.session(sp)
		late = c.view(sp, s) > c.cfg.Threshold
		f, body, err = c.plan(sp, s)
	}
	if err != nil {
		return out, err
	}
	return c.compose(sp, s, f, body, out, late), nil
}

// fixed is the tokens of the head and summary s.
func (c *compactor) fixed(sp *span, s session) int {
	if s.Covered == 0 {
		return sp.headTok
	}
	return sp.headTok + c.tok.Count(s.Summary)
}

// compose sends the request as plan laid it out (f, body) with summary
// s: head, summary and the turns since it, the newest within keep_tokens
// verbatim (the last turn always), older ones with their tool outputs
// folded, as many more as the threshold needs, and the oldest left out if
// even that passes it. late says the summary the request needed was not
// ready: it is counted and logged as bypassed.
func (c *compactor) compose(sp *span, s session, f folding, body []byte, out outcome, late bool) outcome {
	if body == nil {
		return out // no summary and nothing to fold: as sent
	}
	out.body, out.compressed, out.sent = body, true, f.tokens
	out.guidelineID, out.link = s.GuidelineID, s.Link
	c.m.tokensSaved.Add(float64(max(0, out.original-out.sent)))
	if late {
		out.bypassed, out.link = true, BackendFolded
		if f.truncated(sp, s) {
			out.link = LinkTruncation
		}
		c.m.summaryBypassed.Inc()
		slog.Info("summary not ready; request folded or truncated", "session", sp.id, "tokens_original", out.original,
			"tokens_sent", out.sent, "summary_covers", s.Covered, "folded_messages", f.verbatim-f.drop,
			"dropped_messages", f.drop-sp.conv.head-s.Covered)
	}
	return out
}

// plan lays sp out with summary s as compose sends it, with no side
// effect; body is nil when there is no summary and nothing to fold.
func (c *compactor) plan(sp *span, s session) (folding, []byte, error) {
	note, err := foldedNote()
	if err != nil {
		return folding{}, nil, err
	}
	from := sp.conv.head + s.Covered
	f := c.layout(sp, from, c.fixed(sp, s), note)
	if s.Covered == 0 && f.drop == from && f.verbatim == from {
		return f, nil, nil
	}
	body, err := f.body(sp.conv, s.Summary, note)
	return f, body, err
}

// await waits for the summary of sp, starting it if none is under way,
// for at most max_wait. It does not wait when the summary is not expected
// within the bound (or a request already waited the bound for it), nor
// when the conversation has grown past the threshold since it started
// (the wait would end in truncation anyway).
// It reports whether the request waited.
func (c *compactor) await(ctx context.Context, sp *span, s session) bool {
	if sp.cut <= sp.conv.head+s.Covered {
		return false // nothing left to summarize: only truncation helps
	}
	p := c.background(sp, s, "sync")
	if p == nil {
		return false
	}
	bound := c.cfg.MaxWait
	left := p.started.Add(c.pace.latency()).Sub(c.pace.now())
	if left > bound || p.late.Load() {
		return false
	}
	// The next summary is about the size of this one.
	if p.cut < len(sp.tok) && sp.headTok+c.tok.Count(s.Summary)+sp.tail(p.cut) > c.cfg.Threshold {
		return false
	}
	t0 := time.Now()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.late.Store(true)
	case <-ctx.Done():
	}
	d := time.Since(t0)
	c.m.summaryWaited.Inc()
	c.m.summaryWait.Observe(d.Seconds())
	// estimate 0: no summary was timed yet, so none was expected.
	slog.Info("waited for a summary", "session", sp.id, "took", d, "bound", bound, "estimate", c.pace.latency())
	return true
}

// startAt is the view, in tokens, past which the next summary starts:
// lead tokens before the threshold, so that it lands in time, but never
// below the floor, so that each summary folds at least the floor's worth
// of turns (early starts must not mean many more summaries); the trigger
// while the conversation's pace is not known.
func (c *compactor) startAt(lead int, known bool) int {
	if !known {
		return c.trigger()
	}
	return max(c.floor(), c.cfg.Threshold-lead)
}

// floor is the history, in tokens, below which no summary is computed.
func (c *compactor) floor() int {
	f := c.cfg.Floor
	if f == 0 {
		f = c.cfg.Trigger
	}
	return int(f * float64(c.cfg.Threshold))
}

func (c *compactor) trigger() int { return int(c.cfg.Trigger * float64(c.cfg.Threshold)) }

// uncounted reports whether a request's messages, given as their JSON,
// need not be decoded and counted: no token budget charges them, and
// they cannot pass the trigger. parseConversation asks it.
func (c *compactor) uncounted(msgs string) bool {
	return !c.countAll && c.belowTrigger(msgs, c.floor())
}

// belowTrigger reports, without decoding or tokenizing the messages raw
// (their JSON array), that their tokens cannot pass trigger, so the
// request goes on as it came and starts no summary: what prepare decides
// after counting them.
//
// The bound: every string counted (roles, texts, tool names and
// arguments) is a JSON value of its own in the messages' bytes and
// decodes to no more bytes than its JSON (escapes only shrink), and a
// token is at least one byte; each counted message adds its framing and
// at most a role that is not in the bytes (an Anthropic tool result
// becomes a "tool" message), and comes from a JSON object of its own.
// Two things would break the bound, so they take the counting path:
// bytes that are not UTF-8 (each may count as a replacement character of
// three bytes) and a number with an exponent (a text given as 1e300 is
// spelled out in full).
func (c *compactor) belowTrigger(raw string, trigger int) bool {
	if len(raw) > trigger || !utf8.ValidString(raw) {
		return false
	}
	objects := 0
	inString, escaped := false, false
	for i := 0; i < len(raw); i++ {
		switch b := raw[i]; {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{':
			objects++
		case (b == 'e' || b == 'E') && i > 0 && raw[i-1] >= '0' && raw[i-1] <= '9':
			return false
		}
	}
	return len(raw)+objects*c.framing <= trigger
}

// background computes the next summary of sp unless one is under way,
// and returns the one under way (nil once the server stops, or when a
// summary newer than s has landed). mode says
// whether a request needs it now (sync) or ahead of need (background).
func (c *compactor) background(sp *span, s session, mode string) *pending {
	c.mu.Lock()
	if p, busy := c.pending[sp.id]; busy || c.bg.Err() != nil {
		c.mu.Unlock()
		return p
	}
	// A summary stores its session before it stops being pending, so one
	// that ended since s was read is in the store now: s is stale.
	if cur := c.session(sp); cur.Covered > s.Covered {
		c.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	p := &pending{started: c.pace.now(), cut: sp.cut, done: done}
	c.pending[sp.id] = p
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.pending, sp.id)
			c.mu.Unlock()
			close(done)
		}()
		if _, err := c.advance(c.bg, sp, s, mode); err != nil {
			slog.Warn("background summary", "session", sp.id, "err", err)
		}
	}()
	return p
}

// advance folds raw messages [head+s.Covered, cut) into the summary with
// the fallback chain and stores the new session.
func (c *compactor) advance(ctx context.Context, sp *span, s session, mode string) (session, error) {
	g := c.gl.current()
	in := historyInput(sp.conv.task(), nil, sp.history, s.Summary, sp.off[sp.conv.head+s.Covered], sp.off[sp.cut], c.view(sp, s))
	t0 := time.Now()
	var res compress.Output
	var linkName string
	var tried []attempt
	if g == nil {
		// Without a guideline only truncation is possible.
		g = &activeGuideline{}
		res, linkName, tried = c.chain.summarize(ctx, in, g, LinkTruncation)
	} else {
		res, linkName, tried = c.chain.summarize(ctx, in, g, "")
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	covered := -1
	for r := sp.conv.head; r <= len(sp.conv.raw); r++ {
		if sp.off[r] == res.Covered {
			covered = r - sp.conv.head
			break
		}
	}
	if covered < 0 {
		return s, fmt.Errorf("compressor covered %d messages, not a message boundary", res.Covered)
	}
	c.pace.summarized(linkName, time.Since(t0))
	ns := session{ID: sp.id, Summary: res.Summary, Covered: covered, PrefixHash: sp.prefixHash(covered), GuidelineID: g.id, Link: linkName}
	c.store.put(ns)
	c.m.compressions.WithLabelValues(linkName, mode).Inc()
	slog.Debug("summary", "session", sp.id, "mode", mode, "link", linkName, "covered", covered,
		"tokens", c.tok.Count(res.Summary), "took", time.Since(t0), "chain", tried)
	if c.log != nil {
		c.log.record(sp, in, res, g.id, linkName)
	}
	return ns, nil
}

// close waits for the background summaries to stop.
func (c *compactor) close() { c.wg.Wait() }
