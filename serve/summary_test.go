package serve

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/logtest"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// optimized is a history guideline as optimize run selects them: its rules
// move the facts from the COMPLETED section it opens with to a FACT CACHE.
const optimized = `You keep a running summary of an agent's work.

COMPLETED: list the subtasks finished so far, with brief results.

[Instruction]
{{ task }}
[Previous summary]
{{ prev_summary }}
[Turns]
{{ history }}

Rules:
- Copy word for word into a FACT CACHE every sentence that answers one of the task's questions, one line per question.
- Write REASONING as one sentence.
`

// TestSelectedGuidelineSummariesAccepted: serve judges a summary by the
// rule rollouts use (compress.CheckSummary with the guideline's contract),
// so the summaries of a guideline the rollouts selected are not rejected
// for lacking the section its rules moved the facts out of.
func TestSelectedGuidelineSummariesAccepted(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir := t.TempDir()
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: "test"}, optimized)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Promote(rec.ID); err != nil {
		t.Fatal(err)
	}
	logs := logtest.Capture(t, slog.LevelWarn)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	for i := range 4 {
		resp, b := post(t, url+"/v1/chat/completions", toolConversation(4, "sel"+strconv.Itoa(i)), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i, resp.StatusCode, b)
		}
		if got := resp.Header.Get(HeaderBackend); got != LinkTeacher {
			t.Errorf("request %d: backend %q, want teacher", i, got)
		}
	}
	if n := metric(t, url, `ctxopt_serve_fallbacks_total{link="teacher",reason="invalid"}`); n != 0 {
		t.Errorf("%v teacher summaries rejected:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "rejected") {
		t.Errorf("a rejection was logged:\n%s", logs)
	}
}
