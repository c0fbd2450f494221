package realmodel

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/serve"
)

// The jobs make real runs must load on a machine with no key variables
// (the local server needs none: no_key), point every real role where
// real.sh starts the server (it rewrites 127.0.0.1:18080/ and :18081/ for
// REAL_PORT), and keep what the real model taught: the agent asks for a
// tool call (llama.cpp answered every call under tool_choice auto with
// 500), the mixed setting runs at least 10 test tasks with the real model
// compressing, analyzing and optimizing, and the all-real setting runs on
// the mixed setting's tasks.
func TestRealJobs(t *testing.T) {
	small, err := pipeline.LoadJob("../../jobs/real-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := small.Roles
	for name, c := range map[string]llm.RoleConfig{"agent": r.Agent, "compressor": r.Compressor, "optimizer": r.Optimizer, "judge": r.Judge} {
		if !strings.HasPrefix(c.BaseURL, "http://127.0.0.1:18080/") || !c.NoKey {
			t.Errorf("real-small %s: base_url %q no_key %v; want the chat server at 127.0.0.1:18080 and no key", name, c.BaseURL, c.NoKey)
		}
	}
	if !strings.HasPrefix(r.Embedder.BaseURL, "http://127.0.0.1:18081/") || !r.Embedder.NoKey {
		t.Errorf("real-small embedder: base_url %q; want the embeddings server at 127.0.0.1:18081", r.Embedder.BaseURL)
	}
	if r.Agent.ToolChoice != llm.ToolChoiceRequired {
		t.Errorf("real-small agent tool_choice %q, want required", r.Agent.ToolChoice)
	}

	mixed, err := pipeline.LoadJob("../../jobs/real-mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := mixed.Roles
	if m.Agent.BaseURL != pipeline.Embedded || !strings.HasPrefix(m.Compressor.BaseURL, "http://127.0.0.1:18080/") {
		t.Errorf("real-mixed: agent %q, compressor %q; want the embedded agent and the real compressor", m.Agent.BaseURL, m.Compressor.BaseURL)
	}
	if mixed.Env.TestLimit < 10 || !mixed.Compression.History.Enabled {
		t.Errorf("real-mixed: %d test tasks, history compression %v; want at least 10 and on", mixed.Env.TestLimit, mixed.Compression.History.Enabled)
	}
	if !strings.HasPrefix(m.Optimizer.BaseURL, "http://127.0.0.1:18080/") {
		t.Errorf("real-mixed optimizer %q: optimize run must select with the real model as analyzer and optimizer", m.Optimizer.BaseURL)
	}

	// The all-real setting runs on the first tasks of the mixed setting's
	// test split: the same environment, seed and threshold, fewer tasks.
	all, err := pipeline.LoadJob("../../jobs/real-all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := all.Roles
	for name, c := range map[string]llm.RoleConfig{"agent": a.Agent, "compressor": a.Compressor, "optimizer": a.Optimizer, "judge": a.Judge} {
		if !strings.HasPrefix(c.BaseURL, "http://127.0.0.1:18080/") || !c.NoKey {
			t.Errorf("real-all %s: base_url %q; want the chat server at 127.0.0.1:18080", name, c.BaseURL)
		}
	}
	if a.Agent.ToolChoice != llm.ToolChoiceRequired {
		t.Errorf("real-all agent tool_choice %q, want required", a.Agent.ToolChoice)
	}
	same := all.Env
	same.TestLimit = mixed.Env.TestLimit
	if same != mixed.Env || all.Seed != mixed.Seed || all.Compression.History != mixed.Compression.History || all.Env.TestLimit > mixed.Env.TestLimit {
		t.Errorf("real-all: env %+v seed %d history %+v; want real-mixed's (%+v, %d, %+v) with at most its test tasks",
			all.Env, all.Seed, all.Compression.History, mixed.Env, mixed.Seed, mixed.Compression.History)
	}
}

// The chain make student serves (student -> teacher -> truncation) is what
// optimize serve accepts, filled in as student.sh fills it, with a
// threshold the conversation serve_chain.py sends passes, and requests
// that wait for their summary (keep_tokens -1), so each names its link.
func TestStudentServeConfig(t *testing.T) {
	src, err := os.ReadFile("serve-student.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	filled := strings.NewReplacer("@PROXY@", "28086", "@TEACHER@", "http://127.0.0.1:28080/v1", "@STUDENT@", "http://127.0.0.1:28082/v1",
		"@REGISTRY@", dir, "@SESSIONS@", filepath.Join(dir, "sessions.db")).Replace(string(src))
	if left := regexp.MustCompile(`@[A-Z]+@`).FindString(filled); left != "" {
		t.Fatalf("student.sh does not fill %s", left)
	}
	path := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(path, []byte(filled), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := serve.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Compression.KeepTokens >= 0 {
		t.Errorf("keep_tokens %d: a request past the threshold would go out folded before its summary lands, and the chain's answer would name no link", cfg.Compression.KeepTokens)
	}
	if cfg.Compressor.Student.MaxTokens == 0 || cfg.Compressor.Teacher.MaxTokens == 0 {
		t.Errorf("max_tokens student %d, teacher %d: a summary that never stops holds its link until the timeout", cfg.Compressor.Student.MaxTokens, cfg.Compressor.Teacher.MaxTokens)
	}
	if cfg.Compression.Threshold > 800 {
		t.Errorf("threshold %d: serve_chain.py's conversation (one training row, about 900 tokens) would not pass it", cfg.Compression.Threshold)
	}
}
