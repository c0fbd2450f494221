// Command temporal is the engine benchmark of make bench (bench/temporal.sh):
// rollouts per second with the in-process engine and with Temporal with 1
// and 2 workers, the embedded model answering every call after a fixed
// 200 ms; the wall time the engine adds per activity (median, p99); and a
// 10,000-task stage's largest history.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/pipeline/temporal"
)

// The stages measured: the three rollouts of the train split that start
// every run (baseline, FIFO, the starting guideline).
var stages = []string{"baseline", "fifo", "prompting"}

func main() {
	bin := flag.String("optimize", "bin/optimize", "optimize binary")
	addr := flag.String("temporal", "", "Temporal dev server HOST:PORT")
	sim := flag.String("sim", "", "base URL of optimize sim --latency 200ms")
	tasks := flag.Int("tasks", 40, "train tasks per rollout stage")
	concurrency := flag.Int("concurrency", 8, "rollouts at once: the in-process engine's, and each worker's")
	scale := flag.Int("scale", 10000, "tasks of the synthetic stage")
	flag.Parse()
	// The SDK's workers log every start and stop at Info.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := context.Background()
	b := bench{bin: *bin, addr: *addr, sim: *sim, tasks: *tasks, conc: *concurrency}
	if err := b.rollouts(ctx); err != nil {
		log.Fatal(err)
	}
	if err := overhead(ctx, *addr); err != nil {
		log.Fatal(err)
	}
	if err := scaleStage(ctx, *addr, *scale); err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	bin, addr, sim string
	tasks, conc    int
}

// rollouts prints rollouts/s of the three engines and their ratios.
func (b bench) rollouts(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "bench-temporal")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	job, err := b.job(dir)
	if err != nil {
		return err
	}
	var rates []float64
	for _, workers := range []int{0, 1, 2} {
		r, err := b.measure(ctx, job, filepath.Join(dir, fmt.Sprint("run", workers)), workers)
		if err != nil {
			return err
		}
		rates = append(rates, r)
		name := "in-process"
		if workers > 0 {
			name = fmt.Sprintf("temporal, %d worker(s)", workers)
		}
		fmt.Printf("rollouts/s %-22s %6.2f  (%d stages of %d tasks, %d at once per process, 200 ms per call)\n", name, r, len(stages), b.tasks, b.conc)
	}
	fmt.Printf("ratio temporal 1 worker / in-process: %.2f (goal >= 0.9)\n", rates[1]/rates[0])
	fmt.Printf("ratio temporal 2 workers / 1 worker:  %.2f (goal >= 1.6)\n", rates[2]/rates[1])
	return nil
}

// job writes the demo job with every role at the sim, the cache off and
// only the rollouts measured afterwards mattering.
func (b bench) job(dir string) (string, error) {
	src, err := os.ReadFile("jobs/demo.yaml")
	if err != nil {
		return "", err
	}
	s := strings.ReplaceAll(string(src), "base_url: embedded", "base_url: "+b.sim+"\n    no_key: true")
	s = strings.Replace(s, "  step_limit: 30\n", fmt.Sprintf("  step_limit: 30\n  train_limit: %d\n", b.tasks), 1)
	s = strings.Replace(s, "cache:\n", "cache:\n  disabled: true\n", 1)
	s = strings.Replace(s, "rollout:\n  concurrency: 8", fmt.Sprintf("rollout:\n  concurrency: %d", b.conc), 1)
	path := filepath.Join(dir, "job.yaml")
	return path, os.WriteFile(path, []byte(s), 0o644)
}

// measure runs the job until the measured stages are done and returns
// their tasks per second of stage wall time (from their manifests).
func (b bench) measure(ctx context.Context, job, out string, workers int) (float64, error) {
	args := []string{"run", "--config", job, "--out", out}
	if workers > 0 {
		queue := fmt.Sprintf("bench-%d-%d", workers, time.Now().UnixNano())
		args = append(args, "--engine", "temporal", "--temporal-address", b.addr)
		// The task queue is the job's; a fresh one per measurement.
		if err := appendEngine(job, out+".yaml", queue); err != nil {
			return 0, err
		}
		args[2] = out + ".yaml"
		for range workers {
			w := exec.CommandContext(ctx, b.bin, "worker", "--temporal-address", b.addr, "--task-queue", queue, "--concurrency", fmt.Sprint(b.conc))
			if err := w.Start(); err != nil {
				return 0, err
			}
			defer func() { _ = w.Process.Kill(); _ = w.Wait() }()
		}
	}
	run := exec.CommandContext(ctx, b.bin, args...)
	if err := run.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	// From the first stage's start to the last one's end: in process they
	// run one after the other, on Temporal side by side.
	var first, last time.Time
	for _, s := range stages {
		m, err := waitDone(filepath.Join(out, "stages", s, pipeline.ManifestFile), 10*time.Minute)
		if err != nil {
			return 0, err
		}
		if first.IsZero() || m.Started.Before(first) {
			first = m.Started
		}
		if m.Finished.After(last) {
			last = m.Finished
		}
	}
	return float64(len(stages)*b.tasks) / last.Sub(first).Seconds(), nil
}

func appendEngine(job, out, queue string) error {
	b, err := os.ReadFile(job)
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, fmt.Sprintf("\nengine:\n  kind: temporal\n  task_queue: %s\n", queue)...), 0o644)
}

func waitDone(path string, limit time.Duration) (pipeline.Manifest, error) {
	var m pipeline.Manifest
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &m) == nil && m.Status == "done" {
			return m, nil
		}
	}
	return m, errors.New(path + ": not done in time")
}

// overhead prints the wall time Temporal adds per activity: scheduled to
// completed less the task's own 200 ms, with as many pending as the
// worker runs at once (so none waits for a slot).
func overhead(ctx context.Context, addr string) error {
	rep, err := temporal.RunSynthetic(ctx, temporal.SyntheticStage{
		Address: addr, Namespace: pipeline.DefaultTemporalNamespace, Tasks: 400, Work: 200 * time.Millisecond,
		Workers: 1, Concurrency: 8,
		Limits: temporal.Limits{Window: 8, ChunkSize: 500, ChunksPerRun: 10, Heartbeat: 10 * time.Second},
	})
	if err != nil {
		return err
	}
	n := len(rep.Added)
	fmt.Printf("added wall time per activity: median %v, p99 %v (%d activities of 200 ms, 8 pending, 1 worker)\n",
		rep.Added[n/2].Round(100*time.Microsecond), rep.Added[(n*99)/100].Round(100*time.Microsecond), n)
	return nil
}

// scaleStage runs a stage of n quick tasks with the engine's limits and
// prints its largest history.
func scaleStage(ctx context.Context, addr string, n int) error {
	rep, err := temporal.RunSynthetic(ctx, temporal.SyntheticStage{
		Address: addr, Namespace: pipeline.DefaultTemporalNamespace, Tasks: n, Work: 5 * time.Millisecond,
		Workers: 2, Concurrency: 100, Limits: temporal.DefaultLimits,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d-task stage: %v, %d executions (stage and chunks), largest history %d events (warning at 10,240)\n",
		n, rep.Wall.Round(time.Second), rep.Executions, rep.MaxEvents)
	if rep.MaxEvents >= 10240 {
		return fmt.Errorf("a history reached %d events", rep.MaxEvents)
	}
	return nil
}
