package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact/redacttest"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/serve"
)

// planted is one shape of one corpus sample, with the id of the task,
// session or conversation that carries it.
type planted struct {
	id     string
	sample redacttest.Sample
	shape  redacttest.Shape
}

func plantedCorpus() []planted {
	var ps []planted
	for i, s := range redacttest.Samples() {
		for j, sh := range redacttest.Shapes(s) {
			ps = append(ps, planted{fmt.Sprintf("s%02d-%02d", i, j), s, sh})
		}
	}
	return ps
}

// TestRedactionAcceptance is issue 28's acceptance check of redaction:
// every shape (redacttest.Shapes: URL-encoded user-info and split lines
// among them) of every planted secret of the 13 kinds goes through each
// output user text reaches, by the built commands, and no output gives
// back any secret, or any piece of one FragmentLen characters long, as it
// is or decoded.
func TestRedactionAcceptance(t *testing.T) {
	corpus := plantedCorpus()
	kinds := map[string]bool{}
	for _, p := range corpus {
		kinds[p.sample.Kind] = true
	}
	if len(kinds) != 13 {
		t.Fatalf("the corpus has %d secret kinds, want 13", len(kinds))
	}
	outputs := []struct {
		name string
		// run sends the corpus through the output and returns the texts a
		// reader can see, by where they are.
		run func(t *testing.T, corpus []planted) map[string]string
	}{
		{"dataset", datasetOutput},
		{"import", importOutput},
		{"session log", sessionLogOutput},
		{"error message", errorOutput},
	}
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			start := time.Now()
			texts := o.run(t, corpus)
			t.Logf("%d texts in %v", len(corpus), time.Since(start).Round(time.Millisecond))
			if len(texts) == 0 {
				t.Fatal("the output wrote nothing")
			}
			for where, text := range texts {
				d := redacttest.Decode(text)
				for _, s := range redacttest.Samples() {
					if got := d.Recovered(s); got != "" {
						t.Errorf("%s secret: %q recoverable from %s", s.Kind, got, where)
					}
				}
			}
		})
	}
}

// datasetOutput exports each planted text as a prompt and a completion of
// a compression event with optimize distill. Parquet files hold the rows
// of train.jsonl compressed; distill's own corpus test reads them back.
func datasetOutput(t *testing.T, corpus []planted) map[string]string {
	dir := t.TempDir()
	var lines []byte
	for _, p := range corpus {
		tr := rollout.Trajectory{TaskID: "task-" + p.id, Split: "train", Success: true, Events: []compress.Event{{
			Kind: compress.KindHistory, Step: 3, GuidelineID: "g-1", Model: "teacher",
			Input:  []llm.Message{{Role: "user", Content: "history: " + p.shape.Text}},
			Output: "kept: " + p.shape.Text,
		}}}
		line, err := rollout.EncodeTrajectory(&tr)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, line...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, rollout.TrajectoriesFile), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ds")
	code, stdout, stderr := runCLI(t, "distill", "--run", dir, "--out", out, "--redact-emails", "--validation-fraction", "0")
	// Rows alike once redacted are de-duplicated: all events are read.
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("from %d events", len(corpus))) {
		t.Fatalf("distill: exit %d\n%s%s", code, stdout, stderr)
	}
	texts := treeTexts(t, out)
	for path := range texts {
		if strings.HasSuffix(path, ".parquet") {
			delete(texts, path)
		}
	}
	texts["stdout"], texts["stderr"] = stdout, stderr
	return texts
}

// importOutput imports an OpenAI chat log whose sessions carry each planted
// text in a user message, a tool call's arguments and the reply.
func importOutput(t *testing.T, corpus []planted) map[string]string {
	dir := t.TempDir()
	var log []byte
	for _, p := range corpus {
		args, _ := json.Marshal(map[string]string{"query": p.shape.Text})
		line, err := json.Marshal(map[string]any{
			"request": map[string]any{"model": "gpt-4.1-mini", "messages": []map[string]string{
				{"role": "system", "content": "You are an agent."},
				{"role": "user", "content": "look at this: " + p.shape.Text},
			}},
			"response": map[string]any{"choices": []map[string]any{{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "noted " + p.shape.Text,
				"tool_calls": []map[string]any{{"id": "call_" + p.id, "type": "function", "function": map[string]string{"name": "search", "arguments": string(args)}}},
			}}}},
			"metadata": map[string]string{"session_id": p.id},
		})
		if err != nil {
			t.Fatal(err)
		}
		log = append(append(log, line...), '\n')
	}
	in := filepath.Join(dir, "log.jsonl")
	if err := os.WriteFile(in, log, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "imported")
	code, stdout, stderr := runCLI(t, "import", "--format", "openai-chat", "--in", in, "--out", out, "--redact-emails")
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("imported %d sessions", len(corpus))) {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	texts := treeTexts(t, out)
	texts["stdout"], texts["stderr"] = stdout, stderr
	return texts
}

// sessionLogOutput sends one conversation per planted text, long enough to
// be compressed, through optimize serve's OpenAI proxy in front of optimize sim, with
// session logs on, and reads the log written at shutdown and serve's own
// log lines.
func sessionLogOutput(t *testing.T, corpus []planted) map[string]string {
	_, simURL, _ := startLogged(t, nil, "url", "sim", "--listen", "127.0.0.1:0")
	dir := t.TempDir()
	reg, err := guideline.OpenRegistry(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	promoteBuiltin(t, reg, "")
	sessions := filepath.Join(dir, "sessions")
	cfg := filepath.Join(dir, "serve.yaml")
	yaml := fmt.Sprintf("upstream:\n  openai:\n    base_url: %s\ncompression:\n  registry: %s\n  threshold: 300\ncompressor:\n  teacher:\n    base_url: %s\n    model: ctxopt-sim\nauth:\n  anonymous: true\nsession_log:\n  dir: %s\n  redact_emails: true\n",
		simURL, reg.Dir(), simURL, sessions)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, addr, logs := startLogged(t, nil, "addr", "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	filler := strings.Repeat("The river of Ostrel is the Vell and floods in spring. ", 20)
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "search", "description": "search the corpus",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]string{"type": "string"}}}}}}
	for _, p := range corpus {
		msgs := []map[string]any{
			{"role": "system", "content": "You answer questions by searching."},
			{"role": "user", "content": "conversation " + p.id + ": " + p.shape.Text},
		}
		for i, content := range []string{p.shape.Text + "\n" + filler, filler, filler, filler} {
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "searching", "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]string{"name": "search", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": content})
		}
		body, _ := json.Marshal(map[string]any{"model": "ctxopt-sim", "messages": msgs, "tools": tools})
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get(serve.HeaderCompressed) != "true" {
			t.Fatalf("chat %s: %d, compressed %q: %s", p.id, resp.StatusCode, resp.Header.Get(serve.HeaderCompressed), b)
		}
	}
	// A summary a request stopped waiting for is cancelled at shutdown,
	// and its record with it: let every conversation's land first.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, ok := compressions(t, addr)
		if !ok || n >= len(corpus) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d conversations summarized", n, len(corpus))
		}
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve exited with %v\n%s", err, logs.String())
	}
	texts := treeTexts(t, sessions)
	log := texts[filepath.Join(sessions, rollout.TrajectoriesFile)]
	for _, p := range corpus {
		if !strings.Contains(log, "conversation "+p.id+":") {
			t.Errorf("the session log has no conversation %s", p.id)
		}
	}
	texts["serve's log"] = logs.String()
	return texts
}

// compressions returns the summaries serve at addr has made, false when
// its metrics do not say.
func compressions(t *testing.T, addr string) (int, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ctxopt_serve_compressions_total{"); ok {
			var c float64
			if _, err := fmt.Sscan(v[strings.LastIndexByte(v, ' ')+1:], &c); err == nil {
				n += int(c)
			}
		}
	}
	return n, true
}

// errorOutput puts each planted text where a failing command quotes it:
// a flag value in its error, and a compressor URL's user-info (the
// password printed in full before issue 28).
func errorOutput(t *testing.T, corpus []planted) map[string]string {
	texts := map[string]string{}
	for _, p := range corpus {
		code, stdout, stderr := runCLI(t, "--log-level", p.shape.Text, "cache", "stats")
		if code != exitUsage || !strings.Contains(stderr, "--log-level") || !strings.Contains(stderr, "[REDACTED:") {
			t.Fatalf("--log-level %q: exit %d, want %d with the value redacted:\n%s", p.shape.Text, code, exitUsage, stderr)
		}
		texts[p.id+" --log-level"] = stdout + stderr
	}
	job := writeJob(t, t.TempDir(), nil)
	for i, s := range redacttest.Samples() {
		spec := "x=none,compressor=https://" + url.UserPassword("admin", s.Leak).String() + "@llm.internal/v1"
		code, stdout, stderr := runCLI(t, "eval", "--config", job, "--out", t.TempDir(), "--candidate", spec)
		if code != exitUsage || !strings.Contains(stderr, "[REDACTED:") {
			t.Fatalf("--candidate %q: exit %d, want %d with the password redacted:\n%s", spec, code, exitUsage, stderr)
		}
		texts[fmt.Sprintf("s%02d --candidate", i)] = stdout + stderr
	}
	return texts
}
