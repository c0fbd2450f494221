package serve

import (
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

func TestCompressesLongToolConversation(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, promoted, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	hdrs, _ := agentConversation(t, url, 8, nil, 0)
	compressed := 0
	for i, h := range hdrs {
		if h.Get(HeaderCompressed) != "true" {
			continue
		}
		compressed++
		saved, _ := strconv.Atoi(h.Get(HeaderTokensSaved))
		if saved <= 0 {
			t.Errorf("step %d: compressed but saved %q tokens", i+1, h.Get(HeaderTokensSaved))
		}
		if g := h.Get(HeaderGuideline); g != promoted {
			t.Errorf("step %d: guideline %q, want %s", i+1, g, promoted)
		}
		if b := h.Get(HeaderBackend); b != LinkTeacher {
			t.Errorf("step %d: backend %q, want teacher", i+1, b)
		}
	}
	if compressed == 0 {
		t.Fatal("no step was compressed")
	}
	body, _ := up.last()
	checkPairs(t, body)
	msgs := gjson.GetBytes(body, "messages").Array()
	if msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" || msgs[2].Get("role").Str != "user" || msgs[3].Get("role").Str != "assistant" {
		t.Errorf("layout is not system, task, summary, last turns: %s", gjson.GetBytes(body, "messages.#.role").Raw)
	}
	t.Logf("%d of %d steps compressed; last request had %d messages", compressed, len(hdrs), len(msgs))
}
