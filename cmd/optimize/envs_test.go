package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/internal/fakeenv"
)

// httpJob writes the demo job pointed at an environment server with the
// given env.http block (indented under env:).
func httpJob(t *testing.T, dir, httpBlock string) string {
	t.Helper()
	return writeJob(t, dir, func(s string) string {
		old := "env:\n  name: qa            # ACON's 8-objective QA on the bundled corpus\n  dataset: \"\"         # \"\" = bundled datasets/qa\n  top_k: 3\n  step_limit: 30\n"
		if !strings.Contains(s, old) {
			t.Fatal("jobs/demo.yaml changed its env block; update httpJob")
		}
		s = strings.Replace(s, old, "env:\n  name: http\n  step_limit: 8\n  http:\n"+httpBlock, 1)
		return strings.Replace(s, "rounds: 1\n  candidates: 5", "rounds: 1\n  candidates: 2", 1)
	})
}

func appWorldBlock(t *testing.T, dir string, srv *fakeenv.Server, tasks []fakeenv.Task) string {
	t.Helper()
	path := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(path, fakeenv.AppWorldTasksFile(tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("    preset: appworld\n    base_url: %s\n    tasks_file: %s\n    max_retries: 2\n", srv.URL, path)
}

func genericBlock(srv *fakeenv.Server) string {
	return fmt.Sprintf("    preset: generic\n    base_url: %s\n    max_retries: 2\n"+
		"    tasks: {method: GET, path: /tasks, items: tasks}\n"+
		"    tools_endpoint: {method: GET, path: /tools, items: tools}\n", srv.URL)
}

// TestHTTPEnvironmentRollout runs both presets through `optimize rollout`
// with and without compression: every task completes, scores come from
// the server (evaluate for AppWorld, the last reward for generic), and every
// session opened is closed.
func TestHTTPEnvironmentRollout(t *testing.T) {
	const n = 3
	tasks := fakeenv.Tasks(n)
	for _, preset := range []string{"appworld", "generic"} {
		t.Run(preset, func(t *testing.T) {
			dir := t.TempDir()
			var srv *fakeenv.Server
			var cfg string
			if preset == "appworld" {
				srv = fakeenv.NewAppWorld(tasks, fakeenv.Options{})
				cfg = httpJob(t, dir, appWorldBlock(t, dir, srv, tasks))
			} else {
				srv = fakeenv.NewGeneric(tasks, fakeenv.Options{})
				cfg = httpJob(t, dir, genericBlock(srv))
			}
			defer srv.Close()
			runs := 0
			for _, s := range []string{"none", "prompting"} {
				out := filepath.Join(dir, s)
				code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", s, "--out", out)
				if code != 0 {
					t.Fatalf("%s: exit %d\n%s", s, code, stderr)
				}
				sum := readSummary(t, out)
				if sum.Tasks != n || sum.Successes != n || sum.InfraFailures != 0 {
					t.Errorf("%s: %d tasks, %d successes, %d infra failures; want %d, %d, 0", s, sum.Tasks, sum.Successes, sum.InfraFailures, n, n)
				}
				runs += n
			}
			if srv.Opens() != int64(runs) || srv.Closes() != int64(runs) || srv.Open() != 0 {
				t.Errorf("server: %d opened, %d closed, %d still open; want %d, %d, 0", srv.Opens(), srv.Closes(), srv.Open(), runs, runs)
			}
			if preset == "appworld" && srv.Evaluations() != int64(runs) {
				t.Errorf("%d evaluate calls, want %d (scores come from /evaluate)", srv.Evaluations(), runs)
			}
			t.Logf("%s: %d episodes, %d opened, %d closed, %d evaluate calls", preset, runs, srv.Opens(), srv.Closes(), srv.Evaluations())
		})
	}
}

// TestHTTPEnvironmentRun runs the whole job (`optimize run`) on the
// AppWorld-shaped server: baseline, compressed rollouts, selection and the
// test split, every session closed.
func TestHTTPEnvironmentRun(t *testing.T) {
	tasks := fakeenv.Tasks(3)
	srv := fakeenv.NewAppWorld(tasks, fakeenv.Options{})
	defer srv.Close()
	dir := t.TempDir()
	cfg := httpJob(t, dir, appWorldBlock(t, dir, srv, tasks))
	code, stdout, stderr := runCLI(t, "run", "--config", cfg, "--out", filepath.Join(dir, "run"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if srv.Opens() == 0 || srv.Opens() != srv.Closes() || srv.Open() != 0 || srv.Evaluations() != srv.Opens() {
		t.Fatalf("server: %d opened, %d closed, %d open, %d evaluated", srv.Opens(), srv.Closes(), srv.Open(), srv.Evaluations())
	}
	t.Logf("optimize run: %d episodes opened, %d closed, %d evaluated", srv.Opens(), srv.Closes(), srv.Evaluations())
}

// TestHTTPEnvironmentSIGINT interrupts a rollout of the real binary while
// episodes are open: it exits, and every session it opened is closed.
func TestHTTPEnvironmentSIGINT(t *testing.T) {
	for _, preset := range []string{"appworld", "generic"} {
		t.Run(preset, func(t *testing.T) {
			tasks := fakeenv.Tasks(12)
			opts := fakeenv.Options{StepLatency: 150 * time.Millisecond}
			dir := t.TempDir()
			var srv *fakeenv.Server
			var cfg string
			if preset == "appworld" {
				srv = fakeenv.NewAppWorld(tasks, opts)
				cfg = httpJob(t, dir, appWorldBlock(t, dir, srv, tasks))
			} else {
				srv = fakeenv.NewGeneric(tasks, opts)
				cfg = httpJob(t, dir, genericBlock(srv))
			}
			defer srv.Close()
			cmd := exec.Command(binary, "rollout", "--config", cfg, "--strategy", "none", "--out", filepath.Join(dir, "out"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for srv.Opens() < 3 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no episode opened\n%s", stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			openAtSignal := srv.Open()
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if openAtSignal == 0 {
				t.Fatal("no session was open when the signal was sent")
			}
			if code := cmd.ProcessState.ExitCode(); code != exitCancelled {
				t.Errorf("interrupted rollout: exit %d (%v), want %d\n%s", code, err, exitCancelled, stderr.String())
			}
			if msg := stderr.String(); !strings.HasSuffix(msg, "optimize: "+interruptedMessage+"\n") || strings.Contains(msg, "context canceled") {
				t.Errorf("stderr after SIGINT does not end with %q:\n%s", interruptedMessage, msg)
			}
			if srv.Opens() != srv.Closes() || srv.Open() != 0 {
				t.Fatalf("after SIGINT: %d opened, %d closed, %d still open\n%s", srv.Opens(), srv.Closes(), srv.Open(), stderr.String())
			}
			t.Logf("%s: SIGINT with %d sessions open; %d opened in all, %d closed, 0 left open", preset, openAtSignal, srv.Opens(), srv.Closes())
		})
	}
}

// TestHTTPEnvironmentBadReply: a step reply missing the configured path
// fails the rollout with that path in the error.
func TestHTTPEnvironmentBadReply(t *testing.T) {
	tasks := fakeenv.Tasks(1)
	srv := fakeenv.NewGeneric(tasks, fakeenv.Options{DropObservation: true})
	defer srv.Close()
	dir := t.TempDir()
	cfg := httpJob(t, dir, genericBlock(srv))
	code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "none", "--out", filepath.Join(dir, "out"))
	if code == 0 || !strings.Contains(stderr, `no value at "observation" (env.http.step.observation)`) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if srv.Opens() != srv.Closes() {
		t.Errorf("%d opened, %d closed", srv.Opens(), srv.Closes())
	}
}
