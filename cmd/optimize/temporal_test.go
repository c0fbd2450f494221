package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// temporalCLI returns the Temporal CLI that serves the dev server
// (scripts/install-test-tools.sh installs it into .cache/bin), skipping
// the test when it is missing unless CTXOPT_REQUIRE_TEMPORAL=1.
func temporalCLI(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CTXOPT_TEMPORAL"), "../../.cache/bin/temporal"} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs
			}
		}
	}
	if os.Getenv("CTXOPT_REQUIRE_TEMPORAL") == "1" {
		t.Fatal("the Temporal CLI is not installed; run scripts/install-test-tools.sh (CTXOPT_REQUIRE_TEMPORAL=1)")
	}
	t.Skip("the Temporal CLI is not installed (run scripts/install-test-tools.sh, or set CTXOPT_TEMPORAL); skipping the test against a real dev server")
	return ""
}

// freeAddr returns a 127.0.0.1 address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// niced runs name with args at a lower priority where nice exists: the
// dev server and workers share the machine with other tests.
func niced(name string, args ...string) *exec.Cmd {
	if p, err := exec.LookPath("nice"); err == nil {
		return exec.Command(p, append([]string{"-n", "10", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startDevServer starts `temporal server start-dev` (in memory) on a free
// port and returns its address once it accepts connections.
func startDevServer(t *testing.T, cli string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	ui := freeAddr(t)
	_, uiPort, _ := net.SplitHostPort(ui)
	cmd := niced(cli, "server", "start-dev", "--ip", "127.0.0.1", "--headless", "--port", port, "--ui-port", uiPort, "--log-level", "error")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatalf("the dev server did not listen on %s within a minute:\n%s", addr, logs.String())
	return ""
}

// startWorker starts `optimize worker` on queue with env added, its LLM
// requests through the metering proxy at meter, and returns it once it
// polls.
func startWorker(t *testing.T, addr, queue, meter string, env []string) *exec.Cmd {
	t.Helper()
	cmd, _, _ := startLogged(t, env, "task_queue", "worker", "--temporal-address", addr, "--task-queue", queue, "--concurrency", strconv.Itoa(workerConcurrency), "--drain", "5s", "--meter", meter)
	return cmd
}

// startMeter starts `optimize meter` in front of the endpoint upstream,
// writing the ledgers of the run stores under store, and returns it with
// its URL once it listens.
func startMeter(t *testing.T, upstream, store string, env []string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	return startLogged(t, env, "url", "meter", "--listen", "127.0.0.1:0", "--upstream", upstream, "--store", store)
}

// TestTemporalEngineMatchesInProcess runs a small demo job in process and
// on a real Temporal dev server with two workers, one killed with SIGKILL
// mid-stage, and the driver killed too and started again from another
// directory: it attaches to the run's workflow, the run completes once,
// its datasets and selected guideline are byte-identical, spent.json
// counts exactly the requests the endpoint served (the workers' requests
// go through a metering proxy, which is not killed), spent_this_run what
// every process spent since the second driver started, and nothing
// temporary is left in the run directory or the bucket.
//
// The run's files live in the run directory, then in an S3 bucket (an
// in-process fake served on 127.0.0.1), under the same layout. The two
// share one dev server (each its own task queue, workers and endpoint) and
// one in-process reference run, and run side by side: much of their time
// is waiting on the workers.
func TestTemporalEngineMatchesInProcess(t *testing.T) {
	addr := startDevServer(t, temporalCLI(t))
	dir := t.TempDir()
	// The cache is off so no record counts cache hits; every run calls its
	// own fresh model (an endpoint's address changes no result).
	job := func(simAddr string) string {
		cfg := writeJob(t, t.TempDir(), func(s string) string {
			s = strings.ReplaceAll(s, "base_url: embedded", "base_url: http://"+simAddr+"/v1\n    no_key: true")
			s = strings.Replace(s, "  step_limit: 30\n", "  step_limit: 30\n  train_limit: 24\n  test_limit: 8\n", 1)
			return strings.Replace(s, "cache:\n", "cache:\n  disabled: true\n", 1)
		})
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	simAddr := freeAddr(t)
	local := filepath.Join(dir, "inprocess")
	cfg := filepath.Join(dir, "inprocess.yaml")
	if err := os.WriteFile(cfg, []byte(job(simAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, "--listen", simAddr)
	if out, err := exec.Command(binary, "run", "--config", cfg, "--out", local).CombinedOutput(); err != nil {
		t.Fatalf("in-process run: %v\n%s", err, out)
	}
	sim.stop()
	t.Run("variants", func(t *testing.T) {
		for _, v := range []struct {
			name string
			s3   bool
		}{{"run directory", false}, {"s3", true}} {
			t.Run(v.name, func(t *testing.T) {
				t.Parallel()
				var s3 *fakeS3
				if v.s3 {
					s3 = newFakeS3(t)
				}
				simAddr := freeAddr(t)
				matchInProcess(t, addr, simAddr, job(simAddr), local, s3)
			})
		}
	})
}

// workerConcurrency is the tasks each test worker runs at once.
const workerConcurrency = 4

// fakeS3 is an S3 bucket served by gofakes3 in this process.
type fakeS3 struct {
	url     string
	backend *s3mem.Backend
	env     []string // credentials the AWS SDK wants, any value
}

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("runs"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return &fakeS3{
		url:     "s3://runs?prefix=nightly/&endpoint=" + url.QueryEscape(srv.URL) + "&region=us-east-1&use_path_style=true&disable_https=true",
		backend: backend,
		env:     []string{"AWS_ACCESS_KEY_ID=fake", "AWS_SECRET_ACCESS_KEY=fake"},
	}
}

// keys lists the bucket's keys.
func (f *fakeS3) keys(t *testing.T) []string {
	t.Helper()
	res, err := f.backend.ListBucket("runs", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Contents {
		out = append(out, c.Key)
	}
	return out
}

// driver is an `optimize run` on Temporal.
type driver struct {
	cmd   *exec.Cmd
	log   *bytes.Buffer
	ended chan error
}

func startDriver(t *testing.T, cfg, out, addr string, env []string) *driver {
	t.Helper()
	d := &driver{log: &bytes.Buffer{}, ended: make(chan error, 1)}
	d.cmd = exec.Command(binary, "--log-format", "json", "run", "--config", cfg, "--out", out, "--engine", "temporal", "--temporal-address", addr)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.ended <- d.cmd.Wait() }()
	return d
}

// runID is the run workflow's run ID the driver logged with msg; the log
// is read once the driver has ended.
func (d *driver) runID(t *testing.T, msg string) string {
	t.Helper()
	for _, line := range strings.Split(d.log.String(), "\n") {
		var rec struct{ Msg, Run string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
			return rec.Run
		}
	}
	t.Fatalf("the driver did not log %q:\n%s", msg, d.log.String())
	return ""
}

// matchInProcess runs the job (YAML text) on Temporal with its files in
// the run directory or in s3, kills a worker and the driver mid-stage,
// starts the driver again and compares the run with the in-process one at
// local.
func matchInProcess(t *testing.T, addr, simAddr, job, local string, s3 *fakeS3) {
	dir := t.TempDir()
	queue := "q-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	engine := fmt.Sprintf("\nengine:\n  kind: temporal\n  task_queue: %s\n", queue)
	var env []string
	stores := "file://" + filepath.ToSlash(dir) + "/"
	if s3 != nil {
		env = s3.env
		engine += fmt.Sprintf("  storage: %q\n", s3.url)
		stores = s3.url
	}
	cfg := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(cfg, []byte(job+engine), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, "--listen", simAddr)
	meter, meterURL, meterLogs := startMeter(t, "http://"+simAddr+"/v1", stores, env)
	w1, _ := startWorker(t, addr, queue, meterURL, env), startWorker(t, addr, queue, meterURL, env)
	remote := filepath.Join(dir, "first", "temporal")
	first := startDriver(t, cfg, remote, addr, env)
	// Kill one worker, and the driver, once the first stages have records
	// from the workers.
	recorded := func() int {
		if s3 != nil {
			n := 0
			for _, k := range s3.keys(t) {
				if strings.Contains(k, ".remote/") && strings.HasSuffix(k, ".jsonl") {
					n++
				}
			}
			return n
		}
		m, _ := filepath.Glob(filepath.Join(remote, "stages", "*", "rollout.remote", "*.jsonl"))
		return len(m)
	}
	for deadline := time.Now().Add(3 * time.Minute); recorded() < 4; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-first.ended:
			t.Fatalf("the run ended (%v) before 4 tasks were recorded:\n%s", err, first.log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = first.cmd.Process.Kill()
			<-first.ended
			t.Fatalf("no task was recorded within 3 minutes:\n%s", first.log.String())
		}
	}
	if err := w1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.ended
	t.Log("worker 1 and the driver killed with SIGKILL mid-stage")
	// The driver again, as on another machine: with its files in the
	// bucket, from another directory; in the run directory, from there.
	if s3 != nil {
		remote = filepath.Join(dir, "second", "temporal")
	}
	again := startDriver(t, cfg, remote, addr, env)
	if err := <-again.ended; err != nil {
		t.Fatalf("temporal run: %v\n%s", err, again.log.String())
	}
	if a, b := first.runID(t, "run started on Temporal"), again.runID(t, "run attached to its running workflow"); a != b {
		t.Fatalf("the driver started again attached to run %s, the first started %s", b, a)
	}
	sim.stop()

	sameTree(t, filepath.Join(local, "datasets"), filepath.Join(remote, "datasets"))
	a, b := readRunSummary(t, local), readRunSummary(t, remote)
	if a.SelectedGuideline == "" || a.SelectedGuideline != b.SelectedGuideline {
		t.Fatalf("selected guideline: in process %q, temporal %q", a.SelectedGuideline, b.SelectedGuideline)
	}
	sameFile(t, filepath.Join(local, "guidelines"), filepath.Join(remote, "guidelines"), a.SelectedGuideline+".tmpl")
	spent := readSpend(t, filepath.Join(remote, "spent.json"))
	// The meter records each request where the endpoint answers it, those
	// of the worker killed mid-call too: spent.json is what was served.
	served := int64(sim.stopped.Requests)
	if n := int64(spent.Requests); n != served {
		t.Fatalf("spent.json counts %d requests; the endpoint served %d (by role %v)", n, served, sim.stopped.ByRole)
	}
	if spent.Tokens <= 0 {
		t.Fatalf("spent.json counts %d tokens", spent.Tokens)
	}
	// The meter stops on SIGTERM once its requests are done.
	if err := meter.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := meter.Wait(); err != nil {
		t.Fatalf("the meter exited with %v:\n%s", err, meterLogs.String())
	}
	// The summary counts what every process spent for the run: the
	// driver started again began after the first stages' calls.
	if b.SpentThisRun.Requests <= 0 || b.SpentThisRun.Requests >= spent.Requests || b.Spent.Requests != spent.Requests {
		t.Fatalf("summary: spent %d requests, this run %d; spent.json %d", b.Spent.Requests, b.SpentThisRun.Requests, spent.Requests)
	}
	t.Logf("spent.json: %d requests, %d tokens, the endpoint served %d; spent_this_run %d", spent.Requests, spent.Tokens, served, b.SpentThisRun.Requests)
	if left := leftovers(t, remote); len(left) > 0 {
		t.Fatalf("temporary objects left in the run directory: %v", left)
	}
	if s3 != nil {
		// The bucket keeps the run directory's layout under its prefix,
		// with the ledger, and no record a worker left, no staging or
		// temporary object.
		keys := s3.keys(t)
		for _, k := range keys {
			if !strings.HasPrefix(k, "nightly/temporal/") || strings.Contains(k, ".remote/") || strings.Contains(k, ".partial/") || strings.Contains(k, ".tmp-") {
				t.Fatalf("the bucket holds %s (of %d keys)", k, len(keys))
			}
		}
		for _, want := range []string{"job.yaml", "summary.json", "spent.json", "guidelines/" + a.SelectedGuideline + ".tmpl", "stages/baseline/manifest.json"} {
			if !slices.Contains(keys, "nightly/temporal/"+want) {
				t.Fatalf("the bucket lacks %s (of %d keys)", want, len(keys))
			}
		}
		t.Logf("bucket: %d keys, the run directory's layout", len(keys))
	}
}

type runSummary struct {
	SelectedGuideline string     `json:"selected_guideline"`
	Spent             spendCount `json:"spent"`
	SpentThisRun      spendCount `json:"spent_this_run"`
}

type spendCount struct {
	Requests int `json:"requests"`
}

func readRunSummary(t *testing.T, dir string) runSummary {
	t.Helper()
	var s runSummary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameTree fails unless dirs a and b hold the same files, byte for byte.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		if rel == "manifest.json" {
			sameManifest(t, p, filepath.Join(b, rel))
		} else {
			sameFile(t, a, b, rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var m int
	_ = filepath.WalkDir(b, func(_ string, d fs.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			m++
		}
		return nil
	})
	if n == 0 || n != m {
		t.Fatalf("%s holds %d files, %s %d", a, n, b, m)
	}
}

// sameManifest compares two dataset manifests but for their inputs'
// SHA-256: the trajectories they name record each compression's wall-clock
// latency, which differs between any two runs, even in process.
func sameManifest(t *testing.T, a, b string) {
	t.Helper()
	var ms [2]string
	for i, p := range []string{a, b} {
		var m map[string]any
		raw, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(raw, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		ins, _ := m["inputs"].([]any)
		for _, in := range ins {
			delete(in.(map[string]any), "sha256")
		}
		out, _ := json.Marshal(m)
		ms[i] = string(out)
	}
	if ms[0] != ms[1] {
		t.Errorf("%s and %s differ beyond their inputs' hashes:\n%s\n%s", a, b, ms[0], ms[1])
	}
}

// leftovers lists what a run directory holds that an interrupted writer
// or a worker leaves: temporary files, worker records, staging dirs.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if strings.Contains(name, ".tmp-") || strings.HasSuffix(name, ".remote") || strings.HasSuffix(name, ".partial") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestScheduleCreateListDelete manages a nightly schedule on a real dev
// server: created, it is listed with its cron and next run; deleted, it
// is gone.
func TestScheduleCreateListDelete(t *testing.T) {
	addr := startDevServer(t, temporalCLI(t))
	cfg := filepath.Join(t.TempDir(), "nightly.yaml")
	if code, _, stderr := runCLI(t, "schedule", "create", "--temporal-address", addr, "--id", "nightly-test", "--cron", "30 3 * * *", "--config", cfg); code != 0 {
		t.Fatalf("create: exit %d\n%s", code, stderr)
	}
	// Schedules are listed from the server's visibility store, which
	// catches up within moments.
	var out string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out, "nightly-test\t30 3 * * *\tnext ") && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, out, _ = runCLI(t, "schedule", "list", "--temporal-address", addr)
	}
	if !strings.Contains(out, "nightly-test\t30 3 * * *\tnext ") {
		t.Fatalf("list after create:\n%s", out)
	}
	if code, _, stderr := runCLI(t, "schedule", "delete", "--temporal-address", addr, "nightly-test"); code != 0 {
		t.Fatalf("delete: exit %d\n%s", code, stderr)
	}
	for deadline := time.Now().Add(30 * time.Second); strings.Contains(out, "nightly-test") && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, out, _ = runCLI(t, "schedule", "list", "--temporal-address", addr)
	}
	if strings.Contains(out, "nightly-test") {
		t.Fatalf("list after delete:\n%s", out)
	}
}

// TestWorkerDrainsOnSIGTERM: a worker told to stop takes no new task,
// lets the running ones finish and exits 0.
func TestWorkerDrainsOnSIGTERM(t *testing.T) {
	addr := startDevServer(t, temporalCLI(t))
	w, _, logs := startLogged(t, nil, "task_queue", "worker", "--temporal-address", addr, "--drain", "5s")
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker exited with %v:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker still running 30 s after SIGTERM:\n%s", logs.String())
	}
	for _, msg := range []string{"worker draining", "worker stopped"} {
		if !strings.Contains(logs.String(), msg) {
			t.Fatalf("the worker did not log %q:\n%s", msg, logs.String())
		}
	}
}
