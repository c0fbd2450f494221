package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/rollout"
)

// simServer is `optimize sim` running standalone on 127.0.0.1.
type simServer struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	// stopped is the log record the server writes when it stops.
	stopped struct {
		Requests int            `json:"requests"`
		ByRole   map[string]int `json:"by_role"`
		Faults   map[string]int `json:"faults"`
	}
}

// startSim starts `optimize sim` with the given fault flags; the test's
// cleanup stops it.
func startSim(t *testing.T, flags ...string) *simServer {
	t.Helper()
	s := &simServer{done: make(chan struct{})}
	s.cmd = exec.Command(binary, append([]string{"--log-format", "json", "sim", "--listen", "127.0.0.1:0"}, flags...)...)
	logs, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	sc := bufio.NewScanner(logs)
	for s.url == "" && sc.Scan() {
		var rec struct{ URL string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			s.url = rec.URL
		}
	}
	if s.url == "" {
		t.Fatal("sim did not log its URL")
	}
	go func() {
		defer close(s.done)
		for sc.Scan() {
			var rec struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "embedded model stopped" {
				json.Unmarshal(sc.Bytes(), &s.stopped)
			}
		}
	}()
	return s
}

// stop interrupts the server and waits for its last log line.
func (s *simServer) stop() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
		<-s.done
	}
}

// remoteJob writes the demo job with every role at url.
func remoteJob(t *testing.T, dir, url string, edit func(string) string) string {
	return writeJob(t, dir, func(s string) string {
		s = strings.ReplaceAll(s, "base_url: embedded", "base_url: "+url+"\n    no_key: true\n    timeout: 1s\n    max_retries: 3")
		if edit != nil {
			s = edit(s)
		}
		return s
	})
}

// TestRolloutEndpointDiesMidRun: the endpoint goes away for good; once the
// job's patience is spent the rollout exits 4, says so, and its summary
// counts the unfinished tasks in the success rate.
func TestRolloutEndpointDiesMidRun(t *testing.T) {
	sim := startSim(t, "--latency", "20ms")
	dir := t.TempDir()
	cfg := remoteJob(t, dir, sim.url, func(s string) string {
		return strings.Replace(s, "rollout:\n  concurrency: 8", "rollout:\n  concurrency: 4\n  patience: 1s", 1)
	})
	out := filepath.Join(dir, "out")
	cmd := exec.Command(binary, "rollout", "--config", cfg, "--strategy", "prompting", "--limit", "16", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for countLines(filepath.Join(out+".partial", rollout.TrajectoriesFile)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sim.cmd.Process.Kill()
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code != exitUnfinished || !strings.Contains(stderr.String(), "tasks unfinished") {
		t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, exitUnfinished, stderr.String())
	}
	sum := readSummary(t, out)
	if sum.InfraFailures == 0 || sum.SuccessRate > float64(sum.Tasks-sum.InfraFailures)/float64(sum.Tasks) {
		t.Fatalf("summary: %d unfinished of %d, success %.3f: unfinished tasks must count as not succeeded", sum.InfraFailures, sum.Tasks, sum.SuccessRate)
	}
	t.Logf("%d of %d tasks unfinished; success %.1f%% over all tasks", sum.InfraFailures, sum.Tasks, 100*sum.SuccessRate)
}

// TestSIGTERMExitsPromptly: a long command stops within 2 s of SIGTERM
// with exit 130 and leaves a state the same command resumes. The signal
// comes once the command is in its long work, i.e. a task's record is
// written: what runs once before (the lazily loaded token ranks, the
// search index) is CPU work no signal interrupts, which on a loaded
// machine took longer than the bound when the signal came before it.
func TestSIGTERMExitsPromptly(t *testing.T) {
	dir := t.TempDir()
	// Slow calls keep the commands busy when the signal comes; the resume
	// runs without them (latency changes no result, so it resumes). Each
	// command has a cache of its own: answers cached by another would let
	// it finish its tasks before the signal.
	job := func(name, latency string) string {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		return writeJob(t, sub, func(s string) string {
			s = strings.Replace(s, "step_limit: 30", "step_limit: 30\n  train_limit: 4\n  test_limit: 2", 1)
			return strings.Replace(s, "rollout:\n  concurrency: 8", "rollout:\n  concurrency: 2\nembedded:\n  latency: "+latency, 1)
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		// records is the trajectories file the command's first rollout
		// writes; resumed reads how many tasks its resume kept.
		records string
		resumed func() int
	}{
		{"rollout", []string{"rollout", "--strategy", "prompting", "--out", filepath.Join(dir, "r")}, filepath.Join(dir, "r.partial", rollout.TrajectoriesFile),
			func() int { return readSummary(t, filepath.Join(dir, "r")).ResumedTasks }},
		{"run", []string{"run", "--out", filepath.Join(dir, "run")}, filepath.Join(dir, "run", "stages", "baseline", "rollout.partial", rollout.TrajectoriesFile),
			func() int {
				return readSummary(t, filepath.Join(dir, "run", "stages", "baseline", "rollout")).ResumedTasks
			}},
		{"sim", []string{"sim", "--listen", "127.0.0.1:0", "--latency", "1s"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.records != "" {
				args = append(args, "--config", job(tc.name, "100ms"))
			}
			cmd := exec.Command(binary, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			finished := 0
			if tc.records == "" {
				time.Sleep(300 * time.Millisecond)
			} else if finished = waitForRecord(t, tc.records, done); finished == 0 {
				t.Fatal("no task finished within a minute")
			}
			start := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatal("still running 5 s after SIGTERM")
			}
			took := time.Since(start)
			want := exitCancelled
			if tc.records == "" {
				want = exitOK // a server's normal way to stop
			}
			if code := cmd.ProcessState.ExitCode(); code != want || took > 2*time.Second {
				t.Fatalf("exit %d after %s, want %d within 2 s", code, took, want)
			}
			// A stopped job says how to go on, not "context canceled".
			if msg := stderr.String(); want == exitCancelled && (!strings.HasSuffix(msg, "optimize: "+interruptedMessage+"\n") || strings.Contains(msg, "context canceled")) {
				t.Fatalf("stderr after SIGTERM does not end with %q:\n%s", interruptedMessage, msg)
			}
			t.Logf("%s exited %d %s after SIGTERM, %d tasks finished", tc.name, cmd.ProcessState.ExitCode(), took.Round(time.Millisecond), finished)
			if tc.resumed == nil {
				return
			}
			// The built binary resumes, as it was stopped: under -race the
			// rest of the run takes several times as long.
			code, _, resumeErr := runBinary(t, append(slices.Clone(tc.args), "--config", job(tc.name, "0s"))...)
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, resumeErr)
			}
			if n := tc.resumed(); n < finished {
				t.Fatalf("resume kept %d tasks, want the %d finished before SIGTERM", n, finished)
			}
		})
	}
}

// waitForRecord waits (at most a minute, or until the command ends) for
// the first complete record in path and returns how many there are.
func waitForRecord(t *testing.T, path string, done <-chan struct{}) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatal("the command ended before the signal")
		default:
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Count(b, []byte("\n")) > 0 {
			return bytes.Count(b, []byte("\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// TestSpendSurvivesKill9: a run killed mid-way has spent.json count every
// request the endpoint saw, but for the calls in flight.
func TestSpendSurvivesKill9(t *testing.T) {
	sim := startSim(t, "--latency", "5ms", "--rate-5xx", "0.1")
	dir := t.TempDir()
	concurrency := 4
	// Attempts time out only past 30 s: an attempt the endpoint answered
	// after the client gave up (1 s, under load) is answered but no call,
	// and would count against the bound below as if it were in flight.
	cfg := remoteJob(t, dir, sim.url, func(s string) string {
		s = strings.ReplaceAll(s, "timeout: 1s", "timeout: 30s")
		return strings.Replace(s, "rollout:\n  concurrency: 8", "rollout:\n  concurrency: 4", 1)
	})
	out := filepath.Join(dir, "run")
	cmd := exec.Command(binary, "run", "--config", cfg, "--out", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	spentPath := filepath.Join(out, "spent.json")
	deadline := time.Now().Add(time.Minute)
	for readSpend(t, spentPath).Calls < 150 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	sim.stop()
	spent := readSpend(t, spentPath)
	// Chat requests the endpoint answered (embeddings are not metered).
	answered := sim.stopped.Requests - sim.stopped.ByRole["embedder"]
	for _, n := range sim.stopped.Faults {
		answered -= n
	}
	// At most one call per task in flight: the rollout's concurrency.
	if spent.Calls < answered-concurrency || spent.Calls > answered {
		t.Fatalf("spent.json: %d calls; the endpoint answered %d (in flight at most %d)", spent.Calls, answered, concurrency)
	}
	t.Logf("killed with %d calls (%d requests) journaled; the endpoint answered %d of %d requests", spent.Calls, spent.Requests, answered, sim.stopped.Requests)
}

func readSpend(t *testing.T, path string) pipeline.Spend {
	t.Helper()
	var s pipeline.Spend
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return s
}
