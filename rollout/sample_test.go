package rollout

import (
	"context"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
)

// sampleRecorder records the sample index of every request it forwards.
type sampleRecorder struct {
	Completer
	mu      sync.Mutex
	samples []int
}

func (s *sampleRecorder) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	s.samples = append(s.samples, req.Sample)
	s.mu.Unlock()
	return s.Completer.Complete(ctx, req)
}

// The sample index of a run reaches every request: the agent's (with its
// malformed-reply retries in a range of their own) and the compressor's.
func TestSampleReachesEveryRequest(t *testing.T) {
	histG := &compress.Prompt{ID: "h-test", Template: tmpl("HIST {task}\nPREV {prev_summary}\n{history}")}
	for _, s := range []int{0, 2} {
		agent := &sampleRecorder{Completer: &fakeAgent{need: 6, malformedFirst: s == 0}}
		comp := &sampleRecorder{Completer: &fakeCompressor{}}
		strategy, err := compress.New(compress.Prompting, nil, compress.Deps{
			Compressor: comp, Tokenizer: testTokenizer(t), History: histG, HistoryThreshold: 300,
		})
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{Env: fakeEnv{obsWords: 40}, Model: agent, Tokenizer: testTokenizer(t), StepLimit: 12, Strategy: strategy, Sample: s}
		if _, err := a.Run(context.Background(), testTask()); err != nil {
			t.Fatal(err)
		}
		lo, hi := s*(malformedRetries+1), s*(malformedRetries+1)+malformedRetries
		for _, got := range agent.samples {
			if got < lo || got > hi {
				t.Errorf("sample %d: agent request with sample index %d, want %d..%d", s, got, lo, hi)
			}
		}
		if len(comp.samples) == 0 {
			t.Fatalf("sample %d: no compression happened", s)
		}
		for _, got := range comp.samples {
			if got != s {
				t.Errorf("sample %d: compressor request with sample index %d", s, got)
			}
		}
		if a.Fingerprint().Sample != s {
			t.Errorf("fingerprint sample %d, want %d", a.Fingerprint().Sample, s)
		}
	}
}
