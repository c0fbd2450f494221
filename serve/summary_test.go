package serve

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/logtest"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// demoSelected is a copy of the history guideline `make demo` selects
// (runs/demo/guidelines/<summary.json's selected_guideline>.tmpl): its
// rules move the facts from the COMPLETED section it opens with to a FACT
// CACHE. Refresh it when the demo selects another.
const demoSelected = "testdata/demo-selected.tmpl"

// promoteDemoSelected stores demoSelected in the registry dir, promotes it
// and returns its id.
func promoteDemoSelected(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(demoSelected)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: "test"}, string(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Promote(rec.ID); err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

// TestSelectedGuidelineSummariesAccepted: serving the guideline the demo
// selects, a 50-turn agent conversation is compressed by the teacher and
// none of its summaries is rejected: serve judges a summary by the rule the
// rollouts that selected it used (compress.CheckSummary with the
// guideline's contract).
func TestSelectedGuidelineSummariesAccepted(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir := t.TempDir()
	id := promoteDemoSelected(t, dir)
	logs := logtest.Capture(t, slog.LevelWarn)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	hdrs, _ := agentConversation(t, url, 50, nil, 0)
	byBackend := map[string]int{}
	for i, h := range hdrs {
		if h.Get(HeaderCompressed) != "true" {
			continue
		}
		byBackend[h.Get(HeaderBackend)]++
		if g := h.Get(HeaderGuideline); g != id {
			t.Errorf("turn %d: guideline %q, want %s", i+1, g, id)
		}
	}
	teacher := metric(t, url, `ctxopt_serve_compressions_total{link="teacher",mode="sync"}`) +
		metric(t, url, `ctxopt_serve_compressions_total{link="teacher",mode="background"}`)
	truncated := metric(t, url, `ctxopt_serve_compressions_total{link="truncation",mode="sync"}`) +
		metric(t, url, `ctxopt_serve_compressions_total{link="truncation",mode="background"}`)
	rejected := metric(t, url, `ctxopt_serve_fallbacks_total{link="teacher",reason="invalid"}`)
	t.Logf("50 turns: compressed responses by backend %v; summaries by the teacher %v, truncations %v, rejected %v",
		byBackend, teacher, truncated, rejected)
	if rejected != 0 || truncated != 0 {
		t.Errorf("%v teacher summaries rejected, %v truncations:\n%s", rejected, truncated, logs)
	}
	if teacher == 0 || byBackend[LinkTeacher] == 0 {
		t.Errorf("the teacher link answered no compression (%v summaries, backends %v)", teacher, byBackend)
	}
	if strings.Contains(logs.String(), "rejected") {
		t.Errorf("a rejection was logged:\n%s", logs)
	}
}

// TestMalformedTeacherDegrades: a teacher whose summaries fail the check
// has each one logged at WARN with the rule it broke and counted by rule,
// and once its breaker opens /readyz says degraded (still 200: requests
// are answered, truncated) until it closes.
func TestMalformedTeacherDegrades(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir := t.TempDir()
	id := promoteDemoSelected(t, dir)
	cfg := testConfig(t, up.url(), garbageCompressor(t), dir)
	cfg.Compressor.BreakerFailures = 2
	logs := logtest.Capture(t, slog.LevelWarn)
	_, url := start(t, cfg)
	if code, body := readyz(t, url); code != http.StatusOK || body != "ready guideline="+id+"\n" {
		t.Fatalf("before any compression: /readyz %d %q", code, body)
	}
	if n := metric(t, url, `ctxopt_serve_compressor_breaker_open{link="teacher"}`); n != 0 {
		t.Fatalf("before any compression: compressor_breaker_open{link=teacher} = %v", n)
	}
	for i := range 3 {
		resp, b := post(t, url+"/v1/chat/completions", toolConversation(4, "bad"+strconv.Itoa(i)), nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderBackend) != LinkTruncation {
			t.Fatalf("request %d: status %d backend %q: %s", i, resp.StatusCode, resp.Header.Get(HeaderBackend), b)
		}
	}
	warn := `level=WARN msg="compressor answer rejected" link=teacher reason="invalid summary: none of the guideline's sections (`
	if n := strings.Count(logs.String(), warn); n != 2 || !strings.Contains(logs.String(), "rule="+compress.RuleNoSection) {
		t.Errorf("%d rejections logged with their reason and rule, want 2:\n%s", n, logs)
	}
	series := `ctxopt_serve_compressor_rejections_total{link="teacher",rule="` + compress.RuleNoSection + `"}`
	if n := metric(t, url, series); n != 2 {
		t.Errorf("%s = %v, want 2", series, n)
	}
	if n := metric(t, url, `ctxopt_serve_compressor_breaker_open{link="teacher"}`); n != 1 {
		t.Errorf("compressor_breaker_open{link=teacher} = %v, want 1", n)
	}
	if code, body := readyz(t, url); code != http.StatusOK || body != "degraded guideline="+id+" breaker_open=teacher\n" {
		t.Errorf("breaker open: /readyz %d %q, want 200 degraded naming the teacher", code, body)
	}
}

func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
