package serve

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestPromotionPickedUpWhileServing: a promotion written to the registry
// while requests run (what `optimize nightly` does) is picked up by the
// watch, with no reload call, within a few reload intervals; no request
// fails, and from then on every compressed response names the promoted
// record's id in X-Ctxopt-Guideline.
func TestPromotionPickedUpWhileServing(t *testing.T) {
	up := newRecUpstream(t, sim.Config{Latency: 5 * time.Millisecond})
	dir, a, b := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	_, url := start(t, cfg)
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	var failed, sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, body, err := send(url+"/v1/chat/completions", toolConversation(4, "bg"+strconv.Itoa(w)+"-"+strconv.Itoa(i)), nil)
				sent.Add(1)
				if err != nil || resp.StatusCode != 200 || resp.Header.Get(HeaderCompressed) != "true" {
					failed.Add(1)
					t.Errorf("background request: %v %s", err, body)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	next := func(tag string) string {
		resp, body := post(t, url+"/v1/chat/completions", toolConversation(4, tag), nil)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderCompressed) != "true" {
			t.Fatalf("%s: status %d compressed %q: %s", tag, resp.StatusCode, resp.Header.Get(HeaderCompressed), body)
		}
		return resp.Header.Get(HeaderGuideline)
	}
	if g := next("before"); g != a {
		t.Fatalf("before the promotion: guideline %q, want %s", g, a)
	}
	rec, err := reg.Promote(b)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	deadline := t0.Add(20 * cfg.Compression.Reload)
	for i := 0; next("poll"+strconv.Itoa(i)) != rec.ID; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the promotion of %s was not picked up within %v", rec.ID, 20*cfg.Compression.Reload)
		}
		time.Sleep(cfg.Compression.Reload / 5)
	}
	took := time.Since(t0)
	for i := range 5 {
		if g := next("after" + strconv.Itoa(i)); g != rec.ID {
			t.Errorf("compressed response %d after the swap names %q, want %s", i, g, rec.ID)
		}
	}
	t.Logf("promotion picked up in %v (reload every %v) with %d requests running alongside, %d failed",
		took.Round(time.Millisecond), cfg.Compression.Reload, sent.Load(), failed.Load())
}
