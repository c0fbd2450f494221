package synth

import (
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/templates"
)

// watchHeap samples the Go heap in use every 20 ms until the returned
// function is called, which returns the peak in MB.
func watchHeap() func() float64 {
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(stop)
		wg.Wait()
		return float64(peak) / (1 << 20)
	}
}

// benchLatency is the embedded model's fixed answer time in the
// benchmarks.
const benchLatency = 2 * time.Millisecond

func benchClient(b *testing.B, s *sim.Server, role string) *llm.Client {
	c, err := llm.NewClient(role, llm.RoleConfig{BaseURL: s.URL(), Model: sim.ModelName, Concurrency: 8}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkGenerateEmbedded generates b.N workflows through the embedded
// model answering after a fixed 2 ms, and prints workflows per second and
// the peak heap, which stays flat as the count grows:
//
//	go test -run '^$' -bench GenerateEmbedded -benchtime 10000x ./synth
func BenchmarkGenerateEmbedded(b *testing.B) {
	s, err := sim.Start(b.Context(), "127.0.0.1:0", sim.Config{Latency: benchLatency})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := GenerateConfig{Count: b.N, Seed: 1, Settings: Settings{}.WithDefaults(), Concurrency: 8}
	peak := watchHeap()
	b.ResetTimer()
	start := time.Now()
	sum, err := Generate(b.Context(), benchClient(b, s, "generator"), cfg, b.TempDir())
	elapsed := time.Since(start)
	b.StopTimer()
	mb := peak()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(sum.Generated)/elapsed.Seconds(), "workflows/s")
	b.ReportMetric(mb, "peak-heap-MB")
	b.Logf("%d workflows (%d rejected) in %v, peak heap %.1f MB", sum.Generated, sum.Requested-sum.Generated, elapsed.Round(time.Millisecond), mb)
}

// BenchmarkRunEmbedded generates b.N workflows, then executes each twice
// (full memory, plan-aware teacher at every step) and applies the
// acceptance filter, every role played by the embedded model answering
// after a fixed 2 ms with 8 requests in flight per role. It prints
// workflows executed per second and the peak heap of the run, which
// streams and stays flat as the count grows:
//
//	go test -run '^$' -bench RunEmbedded -benchtime 10000x ./synth
func BenchmarkRunEmbedded(b *testing.B) {
	s, err := sim.Start(b.Context(), "127.0.0.1:0", sim.Config{Latency: benchLatency})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	dir := b.TempDir()
	if _, err := Generate(b.Context(), benchClient(b, s, "generator"), GenerateConfig{Count: b.N, Seed: 1, Settings: Settings{}.WithDefaults(), Concurrency: 8}, dir); err != nil {
		b.Fatal(err)
	}
	agent := benchClient(b, s, "agent")
	src, err := templates.Source("history_plan_aware.tmpl")
	if err != nil {
		b.Fatal(err)
	}
	x := &Executor{
		Agent: agent, Tokenizer: agent.Tokenizer(), Judge: benchClient(b, s, "judge"), Embedder: benchClient(b, s, "embedder"),
		StepLimit: 30, Threshold: DefaultThreshold,
	}
	k := compress.DefaultPlanK
	if x.Teacher, err = compress.New(compress.PlanAware, &compress.PlanAwareParams{K: k}, compress.Deps{
		Compressor: benchClient(b, s, "compressor"), Tokenizer: x.Tokenizer, History: compile(b, src), HistoryThreshold: 1,
	}); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	peak := watchHeap()
	b.ResetTimer()
	start := time.Now()
	sum, err := Run(b.Context(), x, RunOptions{Workflows: filepath.Join(dir, WorkflowsFile), Dir: filepath.Join(dir, "run"), Concurrency: 8})
	elapsed := time.Since(start)
	b.StopTimer()
	mb := peak()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(sum.Executed)/elapsed.Seconds(), "workflows/s")
	b.ReportMetric(mb, "peak-heap-MB")
	b.Logf("%d workflows executed twice (%d accepted, %d compressions) in %v: %.1f workflows/s, peak heap %.1f MB",
		sum.Executed, sum.Accepted, sum.Compressions, elapsed.Round(time.Millisecond), float64(sum.Executed)/elapsed.Seconds(), mb)
}
