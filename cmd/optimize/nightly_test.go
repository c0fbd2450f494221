package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/serve"
)

// nightlySetup is what a nightly test works on: the job, serve's session
// log directory, the registry serve reads, the nightly state and the
// guideline promoted at the start.
type nightlySetup struct {
	dir, job, sessions, registry, state string
	first                               string
}

func newNightlySetup(t *testing.T, tasks int) nightlySetup {
	t.Helper()
	dir := t.TempDir()
	s := nightlySetup{dir: dir, sessions: filepath.Join(dir, "sessions"), registry: filepath.Join(dir, "registry"), state: filepath.Join(dir, "state")}
	s.job = writeJob(t, dir, func(src string) string {
		src = strings.Replace(src, "step_limit: 30", fmt.Sprintf("step_limit: 30\n  train_limit: %d\n  test_limit: %d", tasks, tasks), 1)
		return strings.Replace(src, "candidates: 5", "candidates: 3", 1)
	})
	reg, err := guideline.OpenRegistry(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	s.first = promoteBuiltin(t, reg, "")
	return s
}

// config writes a nightly.yaml with the gate rules and returns its path.
func (s nightlySetup) config(t *testing.T, name string, rules ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "job: %s\nsessions: %s\nregistry: %s\nstate: %s\nreplay_sample: 30\ngate:\n", s.job, s.sessions, s.registry, s.state)
	for _, r := range rules {
		fmt.Fprintf(&b, "  - %q\n", r)
	}
	path := filepath.Join(s.dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// nightly runs optimize nightly as a process; env is added to its
// environment. It returns the exit code (-1 when a signal killed it) and
// the output.
func nightly(t *testing.T, config string, env ...string) (int, string) {
	t.Helper()
	return runWithEnv(t, env, "nightly", "--config", config)
}

// promotedRecords are the registry's promoted history guidelines.
func promotedRecords(t *testing.T, dir string) []string {
	t.Helper()
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := reg.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		if r.Promoted && r.Kind == guideline.KindHistory {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// promotions are the lines of the state's promotions.jsonl.
func promotions(t *testing.T, state string) []pipeline.Promotion {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, pipeline.PromotionsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []pipeline.Promotion
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p pipeline.Promotion
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("promotions.jsonl: %q: %v", line, err)
		}
		out = append(out, p)
	}
	return out
}

// checkRegistry checks that exactly one history guideline is promoted,
// that it is want, and that the file serve loads holds its source.
func checkRegistry(t *testing.T, dir, want string) {
	t.Helper()
	ids := promotedRecords(t, dir)
	if len(ids) != 1 || ids[0] != want {
		t.Fatalf("registry promotes %v, want only %s", ids, want)
	}
	reg, _ := guideline.OpenRegistry(dir)
	_, src, err := reg.Get(want)
	if err != nil {
		t.Fatal(err)
	}
	served, err := os.ReadFile(filepath.Join(dir, guideline.PromotedFile(guideline.KindHistory)))
	if err != nil || string(served) != src {
		t.Fatalf("%s does not hold %s's source (%v)", guideline.PromotedFile(guideline.KindHistory), want, err)
	}
}

func readDecision(t *testing.T, state string) pipeline.Decision {
	t.Helper()
	nights, err := filepath.Glob(filepath.Join(state, pipeline.NightsDir, "*", pipeline.DecisionFile))
	if err != nil || len(nights) == 0 {
		t.Fatalf("no decision in %s (%v)", state, err)
	}
	var d pipeline.Decision
	b, err := os.ReadFile(nights[len(nights)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// conversation is one line of scripts/nightly-sessions.mjs.
type conversation struct {
	Conversation int    `json:"conversation"`
	Session      string `json:"session"`
	Turns        int    `json:"turns"`
	Compressed   int    `json:"compressed"`
	Guideline    string `json:"guideline"`
}

// drive runs scripts/nightly-sessions.mjs against serve at url.
func drive(t *testing.T, node, url string, count, first int, outcome bool) []conversation {
	t.Helper()
	args := []string{"../../scripts/nightly-sessions.mjs", url, nightlyKey, fmt.Sprint(count), fmt.Sprint(first)}
	if outcome {
		args = append(args, "outcome")
	}
	cmd := exec.Command(node, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nightly-sessions: %v\n%s", err, stderr.String())
	}
	var convs []conversation
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c conversation
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		convs = append(convs, c)
	}
	if len(convs) != count {
		t.Fatalf("nightly-sessions printed %d conversations, want %d", len(convs), count)
	}
	return convs
}

func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, nodeErr := exec.LookPath("node")
	_, oaErr := os.Stat("../../.cache/node/node_modules/openai")
	if nodeErr != nil || oaErr != nil {
		msg := "node and the openai package in .cache/node are needed; run scripts/install-test-tools.sh"
		if os.Getenv("CTXOPT_REQUIRE_NODE_SDKS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// nightlyGate are the rules of the nights that promote: replay agreement
// may not drop by 2 points, task success by 35 (16 test tasks).
var nightlyGate = []string{"agreement >= -0.02", "success >= -0.35"}

// killGate is the rule of the kill tests' nights (8 tasks, to keep eleven
// nights short): the mechanics need a gate that passes.
const killGate = "agreement >= -0.02"

// nightlyKey is the client key the conversations send.
const nightlyKey = "nightly-test-client-key"

// startServe starts optimize serve in front of the embedded model
// (optimize sim) with session logs on, compressing past 600 tokens. The
// teacher's latency prior is the embedded model's (milliseconds, as in
// serve.example.yaml) and every turn goes verbatim (keep_tokens -1), so a
// compaction waits for its summary, which names the guideline this test
// follows, instead of going out folded (these conversations end within a
// few turns of their first summary).
func startServe(t *testing.T, s nightlySetup) string {
	t.Helper()
	_, simURL, _ := startLogged(t, nil, "url", "sim", "--listen", "127.0.0.1:0")
	cfg := filepath.Join(s.dir, "serve.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nupstream:\n  openai:\n    base_url: %s\ncompression:\n  registry: %s\n  reload: 200ms\n  threshold: 600\n  keep_tokens: -1\ncompressor:\n  teacher:\n    base_url: %s\n    model: ctxopt-sim\n    latency: 50ms\nauth:\n  key_hashes: [%s]\nlimits:\n  rate: 0\nsession_log:\n  dir: %s\n",
		simURL, s.registry, simURL, serve.HashKey(nightlyKey), s.sessions)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startLogged(t, nil, "addr", "serve", "--config", cfg)
	return "http://" + addr
}

// waitReady waits until serve's /readyz names guideline id.
func waitReady(t *testing.T, url, id string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not load %s: /readyz says %s", id, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNightlyEndToEnd is the nightly loop as a user runs it: the official
// openai client drives 30 long conversations through optimize serve
// (embedded upstream, session logs on); optimize nightly reads them,
// replays them, optimizes, gates and promotes; serve's next compressed
// response carries the new guideline; a second nightly with no new
// sessions does nothing and exits 0; after more traffic, a nightly whose
// gate cannot pass promotes nothing and exits 1.
func TestNightlyEndToEnd(t *testing.T) {
	node := nodeOrSkip(t)
	s := newNightlySetup(t, 16)
	url := startServe(t, s)
	convs := drive(t, node, url, 30, 0, true)
	compressed := 0
	for _, c := range convs {
		if c.Compressed > 0 {
			compressed++
			if c.Guideline != s.first {
				t.Fatalf("conversation %d compressed with %q, want %s", c.Conversation, c.Guideline, s.first)
			}
		}
	}
	if compressed < 10 {
		t.Fatalf("only %d of 30 conversations were compressed: %+v", compressed, convs)
	}

	code, out := nightly(t, s.config(t, "nightly.yaml", nightlyGate...))
	d := readDecision(t, s.state)
	t.Logf("first nightly: exit %d, %s promoted over %s (%s)", code, d.Candidate, d.Incumbent, d.Reason)
	if code != 0 || !d.Pass || d.Sessions != 30 || d.Incumbent != s.first {
		t.Fatalf("first nightly: exit %d, decision %+v\n%s", code, d, out)
	}
	checkRegistry(t, s.registry, d.Candidate)
	nights, _ := filepath.Glob(filepath.Join(s.state, pipeline.NightsDir, "*", pipeline.NightReportFile))
	if len(nights) != 1 {
		t.Fatalf("%d night reports, want 1", len(nights))
	}
	rep, err := os.ReadFile(nights[0])
	if err != nil || !strings.Contains(string(rep), "**Promoted "+d.Candidate) {
		t.Fatalf("report %s: %v\n%s", nights[0], err, rep)
	}
	for _, line := range strings.Split(string(rep), "\n") {
		if strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "- PASS") {
			t.Log(line)
		}
	}
	waitReady(t, url, d.Candidate)
	next := drive(t, node, url, 1, 100, false)[0]
	if next.Compressed == 0 || next.Guideline != d.Candidate {
		t.Fatalf("next conversation: %+v; want compressed with %s", next, d.Candidate)
	}

	code, out = nightly(t, s.config(t, "nightly.yaml", nightlyGate...))
	if code != 0 || !strings.Contains(out, "no new sessions") || len(promotions(t, s.state)) != 1 {
		t.Fatalf("second nightly: exit %d, %d promotions\n%s", code, len(promotions(t, s.state)), out)
	}
	t.Logf("second nightly: exit %d, %q", code, lastLine(out))

	// The operator rolls back to the first guideline; the next night
	// finds the same candidate, but its gate cannot pass.
	reg, err := guideline.OpenRegistry(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Promote(s.first); err != nil {
		t.Fatal(err)
	}
	drive(t, node, url, 6, 200, true)
	code, out = nightly(t, s.config(t, "impossible.yaml", "success > 1"))
	failed := readDecision(t, s.state)
	if code != 1 || failed.Pass || failed.Candidate != d.Candidate || len(failed.Verdicts) != 1 || len(promotions(t, s.state)) != 1 {
		t.Fatalf("gate that cannot pass: exit %d, decision %+v\n%s", code, failed, out)
	}
	checkRegistry(t, s.registry, s.first)
	t.Logf("third nightly (gate \"success > 1\", %d sessions): exit %d, %s", failed.Sessions, code, failed.Reason)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestNightlyKilled kills optimize nightly with SIGKILL at each of five
// points (killpoint.Env) and runs it again: the decision is the one an
// uninterrupted night takes, the registry promotes the candidate once and
// stays consistent.
func TestNightlyKilled(t *testing.T) {
	ref := killFixture(t, "")
	code, out := nightly(t, ref.config(t, "nightly.yaml", killGate))
	want := readDecision(t, ref.state)
	if code != 0 || !want.Pass {
		t.Fatalf("uninterrupted night: exit %d, %+v\n%s", code, want, out)
	}
	for _, point := range []string{"after-import", "replay", "optimize:4", "after-gate", "promote"} {
		s := killFixture(t, ref.job)
		cfg := s.config(t, "nightly.yaml", killGate)
		killed, kout := nightly(t, cfg, killpoint.Env+"="+point)
		if killed != -1 {
			t.Fatalf("%s: exit %d, want killed by SIGKILL\n%s", point, killed, kout)
		}
		// Killed before promoting, the registry still serves the first.
		checkRegistry(t, s.registry, s.first)
		code, out := nightly(t, cfg)
		if !strings.Contains(out, "resumed the night an earlier run began") {
			t.Errorf("%s: the re-run did not resume the night:\n%s", point, out)
		}
		got := readDecision(t, s.state)
		ps := promotions(t, s.state)
		t.Logf("killed at %-12s then re-run: exit %d, decision pass=%v candidate %s (uninterrupted: pass=%v %s), promotions logged %d, registry promotes %v",
			point, code, got.Pass, got.Candidate, want.Pass, want.Candidate, len(ps), promotedRecords(t, s.registry))
		if code != 0 || got.Pass != want.Pass || got.Candidate != want.Candidate || len(ps) != 1 {
			t.Fatalf("%s: exit %d, decision %+v, %d promotions; want %+v once\n%s", point, code, got, len(ps), want, out)
		}
		checkRegistry(t, s.registry, want.Candidate)
		if code, out := nightly(t, cfg); code != 0 || len(promotions(t, s.state)) != 1 {
			t.Fatalf("%s: a third run: exit %d, %d promotions\n%s", point, code, len(promotions(t, s.state)), out)
		}
	}
}

// killFixture is a setup whose session log holds the train split's
// uncompressed rollouts (the session log's record format). With job, it
// shares that job (and so its response cache) and copies the session log
// of the setup that made it.
func killFixture(t *testing.T, job string) nightlySetup {
	t.Helper()
	s := newNightlySetup(t, 8)
	if err := os.MkdirAll(s.sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(s.sessions, "trajectories.jsonl")
	if job != "" {
		s.job = job
		b, err := os.ReadFile(filepath.Join(filepath.Dir(job), "sessions", "trajectories.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return s
	}
	out := filepath.Join(s.dir, "logs")
	code, stdout, stderr := runCLI(t, "eval", "--config", s.job, "--candidate", "none=none", "--split", "train", "--out", out)
	if code != 0 {
		t.Fatalf("eval: exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "rollouts", "none", "sample-0", "trajectories.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}
