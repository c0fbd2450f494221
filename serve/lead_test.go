package serve

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// clock is a settable time for the estimator.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// turns feeds n requests of session id to p, one every step, each a turn
// of perTurn tokens more, from turn *at on; it returns the last lead.
func turns(p *pace, c *clock, id string, at *int, n int, step time.Duration, perTurn int) (int, bool) {
	var lead int
	var ok bool
	for range n {
		c.t = c.t.Add(step)
		*at++
		lead, ok = p.observe(id, *at*perTurn, *at)
	}
	return lead, ok
}

func TestLeadFollowsTheConversationsPace(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	p := newPace(c.now, 24*time.Hour, 100)
	p.summarized(LinkTeacher, 1500*time.Millisecond)
	at := 0
	// A turn every 2 s: a 1.5 s summary started now lands before the
	// next turn; it must start when the next one would pass.
	slow, ok := turns(p, c, "s", &at, 10, 2*time.Second, 500)
	if !ok || slow != 500 {
		t.Fatalf("turns every 2 s: lead %d (known %v), want 500 (1 turn)", slow, ok)
	}
	// The agent speeds up to a turn every 100 ms: 15 turns pass while the
	// same summary is computed. Six turns are enough to see it.
	fast, _ := turns(p, c, "s", &at, 6, 100*time.Millisecond, 500)
	if fast < 5000 {
		t.Errorf("after 6 turns at 100 ms the lead is %d tokens, want >= 5000 (10 turns)", fast)
	}
}

func TestLeadFollowsASlowingSummarizer(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	p := newPace(c.now, 24*time.Hour, 100)
	for range 5 {
		p.summarized(LinkStudent, 300*time.Millisecond)
	}
	at := 0
	before, _ := turns(p, c, "s", &at, 10, 200*time.Millisecond, 500)
	if before != 1000 {
		t.Fatalf("300 ms summaries, a turn every 200 ms: lead %d, want 1000 (2 turns)", before)
	}
	p.summarized(LinkStudent, 3*time.Second)
	p.summarized(LinkStudent, 3*time.Second)
	after, _ := turns(p, c, "s", &at, 1, 200*time.Millisecond, 500)
	if after < 5000 {
		t.Errorf("after two 3 s summaries the lead is %d tokens, want >= 5000 (10 turns)", after)
	}
	// One quick summary does not undo that at once.
	p.summarized(LinkStudent, 300*time.Millisecond)
	if once, _ := turns(p, c, "s", &at, 1, 200*time.Millisecond, 500); once < after/2 {
		t.Errorf("one quick summary cut the lead from %d to %d tokens", after, once)
	}
}

func TestLeadIgnoresAnIdleHour(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	p := newPace(c.now, 24*time.Hour, 100)
	p.summarized(LinkTeacher, time.Second)
	at := 0
	before, _ := turns(p, c, "s", &at, 10, 200*time.Millisecond, 500)
	c.t = c.t.Add(time.Hour)
	// The first turn after the hour says nothing about the pace; the
	// conversation goes on as fast as before.
	after, ok := turns(p, c, "s", &at, 1, 0, 500)
	if !ok || after != before {
		t.Errorf("after an idle hour the lead is %d (known %v), want %d as before", after, ok, before)
	}
	if again, _ := turns(p, c, "s", &at, 1, 200*time.Millisecond, 500); again != before {
		t.Errorf("the turn after that: lead %d, want %d", again, before)
	}
	// A session idle past the session TTL is forgotten with its summary.
	short := newPace(c.now, 30*time.Minute, 100)
	at = 0
	turns(short, c, "old", &at, 3, time.Second, 500)
	c.t = c.t.Add(time.Hour)
	turns(short, c, "new", new(int), 1, 0, 500)
	if _, kept := short.sessions["old"]; kept {
		t.Error("a session idle past the TTL is still estimated")
	}
}

func TestKeepTail(t *testing.T) {
	// Raw messages: head (2), then 4 turns of a call and a result each, of
	// 110, 310, 60 and 410 tokens.
	sp := &span{tok: []int{0, 0, 10, 100, 10, 300, 10, 50, 10, 400}, cuts: []int{2, 4, 6, 8}}
	for _, tc := range []struct {
		keepLast, keepTokens, want int
	}{
		{1, 0, 8},     // the last turn
		{2, 0, 6},     // the last two
		{9, 0, 2},     // more than there are: everything is the tail
		{3, 0, 4},     // three turns, no token bound
		{3, 500, 6},   // three turns are 780 tokens, the last two 470
		{3, 100, 8},   // never fewer than the last turn, whatever it costs
		{9, 10000, 2}, // all turns fit
		{9, 800, 4},   // fewer turns than keep_last: the bound still applies
		{1, 10000, 8}, // keep_last still bounds a generous token tail
	} {
		if got := sp.keep(2, tc.keepLast, tc.keepTokens); got != tc.want {
			t.Errorf("keep_last %d keep_tokens %d: tail starts at %d, want %d", tc.keepLast, tc.keepTokens, got, tc.want)
		}
	}
}

// blockingCompressor is the embedded model holding every call until
// release is closed.
func blockingCompressor(t *testing.T, release chan struct{}) string {
	h, err := sim.NewHandler(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return srv.URL + "/v1"
}

func TestBoundedWait(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	release := make(chan struct{})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), blockingCompressor(t, release), dir)
	cfg.Compression.MaxWait = 150 * time.Millisecond
	// A summary is expected within the bound until one is timed.
	cfg.Compressor.Teacher.Latency = 100 * time.Millisecond
	// Folding allowed, as much as the threshold needs.
	cfg.Compression.KeepTokens = 10000
	srv, url := start(t, cfg)
	note, _ := foldedNote()

	// Past the threshold with no summary, a request that fits once older
	// tool outputs are folded does not wait: it goes folded, every turn
	// there, pairs whole, the last result verbatim.
	t0 := time.Now()
	resp, b := post(t, url+"/v1/chat/completions", toolConversation(6, "fold"), nil)
	if took := time.Since(t0); took >= cfg.Compression.MaxWait {
		t.Errorf("a request that fits folded was held %v", took)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	body, _ := up.last()
	checkPairs(t, body)
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) != 2+2*6 || msgs[3].Get("content").Str != note || msgs[len(msgs)-1].Get("content").Str != observation(5) {
		t.Errorf("want all 6 turns, the first output folded, the last verbatim: %d messages, first output %.40q", len(msgs), msgs[3].Get("content").Str)
	}
	if w, by := metric(t, url, "ctxopt_serve_summary_waited_total"), metric(t, url, "ctxopt_serve_summary_bypassed_total"); w != 0 || by != 1 {
		t.Errorf("waited %v bypassed %v, want 0 and 1", w, by)
	}

	// One that would lose turns even folded waits the bound for the summary
	// expected within it, then goes truncated.
	t0 = time.Now()
	resp, b = post(t, url+"/v1/chat/completions", toolConversation(16, "bw"), nil)
	took := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if took < cfg.Compression.MaxWait || took > cfg.Compression.MaxWait+2*time.Second {
		t.Errorf("the request took %v; want the bound %v and no more than processing beyond it", took, cfg.Compression.MaxWait)
	}
	checkTruncated(t, up, resp, "bw", 16, cfg.Compression.Threshold)
	waited := metric(t, url, "ctxopt_serve_summary_waited_total")
	bypassed := metric(t, url, "ctxopt_serve_summary_bypassed_total")
	if waited != 1 || bypassed != 2 {
		t.Errorf("waited %v bypassed %v, want 1 and 2", waited, bypassed)
	}

	// The summary lands late; the next request uses it without waiting.
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	landed := func() float64 {
		return metric(t, url, `ctxopt_serve_compressions_total{link="teacher",mode="sync"}`) +
			metric(t, url, `ctxopt_serve_compressions_total{link="teacher",mode="background"}`)
	}
	for landed() < 2 && time.Now().Before(deadline) { // "fold" and "bw"
		time.Sleep(10 * time.Millisecond)
	}
	if resp, b := post(t, url+"/v1/chat/completions", toolConversation(17, "bw"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	body, _ = up.last()
	if m := gjson.GetBytes(body, "messages.2.content").Str; !strings.Contains(m, "HISTORY_SUMMARY") {
		t.Errorf("the request after the late summary went without it: third message %.80q", m)
	}
	checkPairs(t, body)

	// A summarizer known to take longer than the bound is not waited for.
	srv.comp.pace.summarized(LinkTeacher, 10*time.Second)
	t0 = time.Now()
	resp, _ = post(t, url+"/v1/chat/completions", toolConversation(16, "other"), nil)
	if took := time.Since(t0); took >= cfg.Compression.MaxWait {
		t.Errorf("a summary expected in 10 s held the request %v (bound %v)", took, cfg.Compression.MaxWait)
	}
	checkTruncated(t, up, resp, "other", 16, cfg.Compression.Threshold)
	if n := metric(t, url, "ctxopt_serve_summary_waited_total"); n != 1 {
		t.Errorf("waited %v, want still 1", n)
	}
}

// checkTruncated checks that the last request went upstream without a
// summary, as the newest turns that fit, ending with the last tool result
// of a conversation of steps turns, each pair whole.
func checkTruncated(t *testing.T, up *upstreamRec, resp *http.Response, tag string, steps, threshold int) {
	t.Helper()
	if resp.Header.Get(HeaderCompressed) != "true" || resp.Header.Get(HeaderBackend) != LinkTruncation {
		t.Errorf("compressed %q backend %q, want true and truncation", resp.Header.Get(HeaderCompressed), resp.Header.Get(HeaderBackend))
	}
	body, _ := up.last()
	checkPairs(t, body)
	msgs := gjson.GetBytes(body, "messages").Array()
	if n := len(msgs); n < 4 || n >= 2+2*steps {
		t.Errorf("%d messages sent; want system, task and some but not all of the %d turns (folding was not enough)", n, steps)
	}
	last := msgs[len(msgs)-1]
	if last.Get("content").Str != observation(steps-1) || last.Get("tool_call_id").Str != "call_"+tag+"_"+strconv.Itoa(steps-1) {
		t.Errorf("the last message is not the last tool result verbatim: %s", last.Raw)
	}
	if got, _ := strconv.Atoi(resp.Header.Get(HeaderTokensSent)); got > threshold {
		t.Errorf("%d tokens sent, over the %d threshold", got, threshold)
	}
}

func TestLatencyPrior(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	priors := []linkPrior{{LinkStudent, 2 * time.Second, 20 * time.Second}, {LinkTeacher, 90 * time.Second, 60 * time.Second}}
	p := newPace(c.now, time.Hour, 100, priors...)
	// Before any summary: the first link's prior, so a fresh server's
	// first summaries start early enough.
	if d := p.latency(); d != 2*time.Second {
		t.Errorf("before any summary: %v, want the student's prior 2s", d)
	}
	// The student fell through; the teacher made it: its prior is capped
	// at its timeout, its first timing replaces it.
	p.last = LinkTeacher
	if d := p.latency(); d != 60*time.Second {
		t.Errorf("teacher's prior of 90s: %v, want its 60s timeout", d)
	}
	p.summarized(LinkTeacher, 3*time.Second)
	if d := p.latency(); d != 3*time.Second {
		t.Errorf("after a 3 s summary: %v", d)
	}
	// A timing over the timeout (queued before the call) is capped too.
	for range 10 {
		p.summarized(LinkTeacher, 5*time.Minute)
	}
	if d := p.latency(); d != 60*time.Second {
		t.Errorf("after 5 min summaries: %v, want the 60s timeout", d)
	}
	if d := newPace(c.now, time.Hour, 100).latency(); d != 0 {
		t.Errorf("no links, no timing: %v, want 0", d)
	}
}

func TestStartAt(t *testing.T) {
	c := &compactor{cfg: Compression{Threshold: 10000, Trigger: 0.8}}
	for _, tc := range []struct {
		name  string
		floor float64
		lead  int
		known bool
		want  int
	}{
		{"pace unknown: the trigger", 0, 0, false, 8000},
		{"a fast summarizer starts later than the trigger, in time", 0, 1000, true, 9000},
		{"a slow one at the floor (the trigger by default), not before", 0, 6000, true, 8000},
		{"a lower floor lets it start earlier", 0.5, 3000, true, 7000},
		{"never below the floor", 0.5, 9000, true, 5000},
	} {
		c.cfg.Floor = tc.floor
		if got := c.startAt(tc.lead, tc.known); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
