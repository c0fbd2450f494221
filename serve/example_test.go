package serve

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestExampleConfigServes starts serve.example.yaml as a new user does after
// `make demo`: no key variable set, its registry (here a temporary one
// holding the demo's selected guideline, promoted), its sessions directory
// missing. A hello world through both APIs gets the embedded model's plain
// chat reply, and a long agent conversation is compressed by the teacher
// with the promoted guideline.
func TestExampleConfigServes(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	cfg, err := LoadConfig(filepath.Join("..", "serve.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.Compression.Registry = filepath.Join(dir, "guidelines")
	id := promoteDemoSelected(t, cfg.Compression.Registry)
	cfg.Sessions.Path = filepath.Join(dir, "runs", "serve", "sessions.db")
	_, url := start(t, cfg)
	if _, err := os.Stat(cfg.Sessions.Path); err != nil {
		t.Errorf("sessions store not created: %v", err)
	}
	if code, body := readyz(t, url); code != 200 || body != "ready guideline="+id+"\n" {
		t.Errorf("/readyz %d %q", code, body)
	}
	// The example's key is "change-me" (auth.key_hashes).
	for _, c := range []struct {
		path, body string
		hdr        map[string]string
		reply      string
	}{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"Authorization": "Bearer change-me"}, "choices.0.message.content"},
		{"/v1/messages", `{"model":"claude-3-5-haiku-latest","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"x-api-key": "change-me", "anthropic-version": "2023-06-01"}, "content.0.text"},
	} {
		resp, b := post(t, url+c.path, []byte(c.body), c.hdr)
		if resp.StatusCode != 200 || gjson.GetBytes(b, c.reply).Str != sim.ChatReply {
			t.Errorf("hello world on %s: %d %s", c.path, resp.StatusCode, b)
		}
	}
	hdrs, _ := agentConversation(t, url, 30, map[string]string{"Authorization": "Bearer change-me"}, 0)
	// A turn whose summary was still being made goes folded (keep_tokens'
	// default): the previous summary, if any, and the turns since.
	backends := map[string]int{}
	for i, h := range hdrs {
		if h.Get(HeaderCompressed) != "true" {
			continue
		}
		b := h.Get(HeaderBackend)
		backends[b]++
		if b != BackendFolded && (b != LinkTeacher || h.Get(HeaderGuideline) != id) {
			t.Errorf("turn %d: backend %q guideline %q, want teacher and %s (or folded)", i+1, b, h.Get(HeaderGuideline), id)
		}
	}
	t.Logf("30 turns through serve.example.yaml: compressed by backend %v", backends)
	if backends[LinkTeacher] == 0 || backends[LinkTeacher] < backends[BackendFolded] {
		t.Errorf("compressed by backend %v: want most by the teacher", backends)
	}
}
