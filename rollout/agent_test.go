package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
)

// fakeEnv answers search with a long observation and finish with success
// when the answer is "done".
type fakeEnv struct{ obsWords int }

func (e fakeEnv) Name() string { return "fake" }
func (e fakeEnv) Tools() []env.ToolSpec {
	return []env.ToolSpec{{Name: "search", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}}
}
func (e fakeEnv) Tasks(string) ([]env.Task, error) { return nil, nil }
func (e fakeEnv) Reset(context.Context, env.Task) (env.Episode, error) {
	return &fakeEpisode{words: e.obsWords}, nil
}

type fakeEpisode struct {
	words int
	n     int
}

func (ep *fakeEpisode) Step(_ context.Context, a env.Action) (env.StepResult, error) {
	ep.n++
	if a.Tool == "finish" {
		s := env.Score{Success: true, EM: 1, F1: 1}
		return env.StepResult{Observation: "ok", Done: true, Score: &s}, nil
	}
	var args struct{ Query string }
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		return env.StepResult{Observation: "error: arguments are not valid JSON"}, nil
	}
	return env.StepResult{Observation: fmt.Sprintf("result %d for %s: %s", ep.n, args.Query, strings.Repeat("lorem ipsum ", ep.words))}, nil
}
func (ep *fakeEpisode) Finish(context.Context) env.Score { return env.Score{} }

var summaryCount = regexp.MustCompile(`searched=(\d+)`)

// fakeAgent searches until it has seen `need` searches (counting those a
// summary reports), then finishes. Malformed replies come for sample 0 when
// malformedFirst is set. With heedsNotice it also finishes when told its
// step is the last.
type fakeAgent struct {
	need           int
	malformedFirst bool
	heedsNotice    bool
	fail           error
	calls          atomic.Int64
}

func (f *fakeAgent) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	f.calls.Add(1)
	if f.fail != nil {
		return llm.Response{}, f.fail
	}
	seen := 0
	for _, m := range req.Messages[1:] {
		seen += len(m.ToolCalls)
		if mm := summaryCount.FindStringSubmatch(m.Content); mm != nil {
			n, _ := strconv.Atoi(mm[1])
			seen += n
		}
	}
	call := llm.ToolCall{ID: fmt.Sprintf("c%d", seen), Name: "search", Arguments: fmt.Sprintf(`{"query":"q%d"}`, seen)}
	if seen >= f.need || f.heedsNotice && req.Messages[len(req.Messages)-1].Content == LastStepNotice {
		call = llm.ToolCall{ID: "fin", Name: "finish", Arguments: `{"answers":["done"]}`}
	}
	if f.malformedFirst && req.Sample == 0 {
		call.Arguments = `{"query":`
	}
	return llm.Response{
		Message: llm.Message{Role: "assistant", Content: "thinking", ToolCalls: []llm.ToolCall{call}},
		Usage:   llm.Usage{PromptTokens: 100 * len(req.Messages), CompletionTokens: 10},
	}, nil
}

// fakeCompressor counts the actions it was shown (plus the previous
// summary's count) for history, and keeps one line for observations.
type fakeCompressor struct{ calls atomic.Int64 }

func (f *fakeCompressor) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	f.calls.Add(1)
	p := req.Messages[0].Content
	if strings.HasPrefix(p, "OBS") {
		return llm.Response{Message: llm.Message{Content: "# Reasoning\nlong\n# Refined Observation\nshort obs"}, Usage: llm.Usage{PromptTokens: 50, CompletionTokens: 5}}, nil
	}
	n := strings.Count(p, "action: search(")
	if mm := summaryCount.FindStringSubmatch(p); mm != nil {
		k, _ := strconv.Atoi(mm[1])
		n += k
	}
	return llm.Response{Message: llm.Message{Content: fmt.Sprintf("<HISTORY_SUMMARY>searched=%d</HISTORY_SUMMARY>", n)}, Usage: llm.Usage{PromptTokens: 40, CompletionTokens: 7}}, nil
}

type tmpl string

func (t tmpl) Render(v map[string]string) (string, error) {
	s := string(t)
	for k, val := range v {
		s = strings.ReplaceAll(s, "{"+k+"}", val)
	}
	return s, nil
}

func testTokenizer(t testing.TB) *llm.Tokenizer {
	t.Helper()
	tok, err := llm.NewTokenizer("")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func testTask() env.Task {
	return env.Task{ID: "t1", Split: "train", Prompt: "Q1: What is the capital of Veloria?", Questions: []env.Question{{Text: "What is the capital of Veloria?", Answers: []string{"done"}}}}
}

func TestAgentStrategies(t *testing.T) {
	tok := testTokenizer(t)
	histG := &compress.Prompt{ID: "h-test", Template: tmpl("HIST {task}\nPREV {prev_summary}\n{history}")}
	obsG := &compress.Prompt{ID: "o-test", Template: tmpl("OBS {task}\n{history}\n{observation}")}
	tests := []struct {
		name          string
		strategy      compress.Name
		params        compress.ModuleParams
		deps          compress.Deps
		need          int
		wantSuccess   bool
		wantSteps     int
		wantHistEvent bool
		wantObsEvent  bool
		check         func(t *testing.T, tr *Trajectory)
	}{
		{name: "none", strategy: compress.None, need: 6, wantSuccess: true, wantSteps: 7},
		{
			name:     "history compression keeps progress in the summary",
			strategy: compress.Prompting, deps: compress.Deps{History: histG, HistoryThreshold: 300},
			need: 6, wantSuccess: true, wantSteps: 7, wantHistEvent: true,
			check: func(t *testing.T, tr *Trajectory) {
				// Right after a compression the agent sees system,
				// task+summary and the last action–observation pair.
				found := false
				for _, turn := range tr.Turns {
					in := turn.Input
					if len(in) == 4 && strings.Contains(in[1].Content, "<HISTORY_SUMMARY>") {
						found = fmt.Sprint(roles(in)) == "[system user assistant tool]"
					}
				}
				if !found {
					t.Fatal("no agent call saw system, task+summary, last pair")
				}
				ev := tr.Events[0]
				if ev.Vars["task"] == "" || !strings.Contains(ev.Vars["history"], `<step n="1">`) || ev.GuidelineID != "h-test" {
					t.Fatalf("event vars = %+v", ev.Vars)
				}
			},
		},
		{
			name:     "observation compression shows the refined part",
			strategy: compress.Guideline, deps: compress.Deps{Observation: obsG, ObservationThreshold: 20},
			need: 3, wantSuccess: true, wantSteps: 4, wantObsEvent: true,
			check: func(t *testing.T, tr *Trajectory) {
				if got := tr.Turns[0].CompressedObservation; got != "short obs" {
					t.Fatalf("compressed observation = %q", got)
				}
				if !strings.Contains(tr.Turns[0].Observation, "lorem") {
					t.Fatal("raw observation not recorded")
				}
			},
		},
		{
			name:     "fifo forgets old turns",
			strategy: compress.FIFO, params: &compress.FIFOParams{Keep: 2},
			// The agent never sees more than 2 searches, so it never
			// finishes and hits the step limit.
			need: 4, wantSuccess: false, wantSteps: 12, wantHistEvent: true,
			check: func(t *testing.T, tr *Trajectory) {
				if !tr.StepLimit {
					t.Fatal("want step limit")
				}
				last := tr.Turns[len(tr.Turns)-1].Input
				if n := len(last); n != 2+2*2+1 || last[n-1].Content != LastStepNotice {
					t.Fatalf("fifo's last context = %d messages ending %q, want the task, 2 turns and the last-step notice", n, last[n-1].Content)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comp := &fakeCompressor{}
			d := tc.deps
			d.Compressor, d.Tokenizer = comp, tok
			s, err := compress.New(tc.strategy, tc.params, d)
			if err != nil {
				t.Fatal(err)
			}
			a := &Agent{Env: fakeEnv{obsWords: 40}, Model: &fakeAgent{need: tc.need}, Tokenizer: tok, StepLimit: 12, Strategy: s}
			tr, err := a.Run(context.Background(), testTask())
			if err != nil {
				t.Fatal(err)
			}
			if tr.Success != tc.wantSuccess || tr.Metrics.Steps != tc.wantSteps {
				t.Fatalf("success=%v steps=%d, want %v %d", tr.Success, tr.Metrics.Steps, tc.wantSuccess, tc.wantSteps)
			}
			var hist, obs bool
			for _, e := range tr.Events {
				hist = hist || e.Kind == "history"
				obs = obs || e.Kind == "observation"
			}
			if hist != tc.wantHistEvent || obs != tc.wantObsEvent {
				t.Fatalf("events history=%v observation=%v", hist, obs)
			}
			m := tr.Metrics
			calls := 0
			for _, e := range tr.Events {
				calls += e.Calls
			}
			if m.CompressorCalls != calls || int(comp.calls.Load()) != calls {
				t.Fatalf("compressor calls %d (server saw %d), events say %d", m.CompressorCalls, comp.calls.Load(), calls)
			}
			// ACON D.2 dependency, recomputed from the turns.
			var dep float64
			peak := 0
			for _, turn := range tr.Turns {
				in, out := float64(turn.Usage.PromptTokens), float64(turn.Usage.CompletionTokens)
				dep += (in + 2*out) * out / 2
				n := tok.CountMessages(turn.Input[1:]) - 3 // no reply primer, no system prompt
				peak = max(peak, n)
			}
			if m.Dependency != dep {
				t.Fatalf("dependency %v, want %v", m.Dependency, dep)
			}
			if m.PeakTokens != peak {
				t.Fatalf("peak tokens %d, want %d (system prompt excluded)", m.PeakTokens, peak)
			}
			if tc.check != nil {
				tc.check(t, tr)
			}
		})
	}
}

func roles(ms []llm.Message) []string {
	var r []string
	for _, m := range ms {
		r = append(r, m.Role)
	}
	return r
}

func TestAgentMalformedToolCallsAreAskedAgain(t *testing.T) {
	agent := &fakeAgent{need: 2, malformedFirst: true}
	a := &Agent{Env: fakeEnv{obsWords: 5}, Model: agent, Tokenizer: testTokenizer(t)}
	tr, err := a.Run(context.Background(), testTask())
	if err != nil {
		t.Fatal(err)
	}
	// The three re-asked replies are counted apart: the episode's own
	// figures are its three used replies.
	m := tr.Metrics
	if !tr.Success || m.MalformedToolCalls != 3 || m.AgentCalls != 3 || m.ReaskedCalls != 3 || m.LLMCalls != 6 {
		t.Fatalf("success=%v malformed=%d agent calls=%d reasked=%d llm calls=%d, want true 3 3 3 6", tr.Success, m.MalformedToolCalls, m.AgentCalls, m.ReaskedCalls, m.LLMCalls)
	}
	if m.ReaskedInputTokens == 0 || m.ReaskedOutputTokens == 0 {
		t.Fatalf("re-asked tokens not counted: %+v", m)
	}
}

func TestAgentInfraFailureIsRecorded(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantInfra bool
	}{
		{"endpoint down", fmt.Errorf("agent: %w", llm.ErrUnavailable), true},
		{"bad request aborts", errors.New("400 bad request"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{Env: fakeEnv{}, Model: &fakeAgent{fail: tc.err}, Tokenizer: testTokenizer(t)}
			tr, err := a.Run(context.Background(), testTask())
			if tc.wantInfra {
				if err != nil || !tr.Infra || tr.Success || tr.InfraErr == "" {
					t.Fatalf("err=%v traj=%+v", err, tr)
				}
				return
			}
			if err == nil {
				t.Fatal("want error")
			}
		})
	}
}

// TestRunDirResumesAfterCrash resumes from the files a crash can leave:
// the tasks whose records are whole are not run again, and the finished
// file holds one record per task, in task order.
func TestRunDirResumesAfterCrash(t *testing.T) {
	tasks := []env.Task{testTask(), testTask(), testTask()}
	for i := range tasks {
		tasks[i].ID = fmt.Sprintf("t%d", i)
	}
	tests := []struct {
		name string
		// partial is the staged file, from the records of the tasks done.
		partial func(done [][]byte) []byte
		done    []int
	}{
		{"torn last line", func(d [][]byte) []byte { return append(append(d[0], '\n'), d[0][:len(d[0])/2]...) }, []int{1}},
		// The last write stopped before the newline: the record is whole.
		{"last record without its newline", func(d [][]byte) []byte { return append(append(d[0], '\n'), d[1]...) }, []int{2, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			agent := &fakeAgent{need: 1}
			r := &Runner{Agent: &Agent{Env: fakeEnv{obsWords: 3}, Model: agent, Tokenizer: testTokenizer(t)}, Concurrency: 2}
			var done [][]byte
			for _, i := range tc.done {
				tr, err := r.Agent.Run(context.Background(), tasks[i])
				if err != nil {
					t.Fatal(err)
				}
				line, err := EncodeTrajectory(tr)
				if err != nil {
					t.Fatal(err)
				}
				done = append(done, line)
			}
			if err := os.MkdirAll(dir+partialSuffix, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir+partialSuffix, TrajectoriesFile), tc.partial(done), 0o644); err != nil {
				t.Fatal(err)
			}
			before := agent.calls.Load()
			res, err := r.RunDir(context.Background(), tasks, dir)
			if err != nil {
				t.Fatal(err)
			}
			if res.Summary.ResumedTasks != len(tc.done) || res.Summary.Tasks != 3 {
				t.Fatalf("summary %+v, want %d of 3 tasks resumed", res.Summary, len(tc.done))
			}
			if got, want := agent.calls.Load()-before, int64(2*(3-len(tc.done))); got != want {
				t.Fatalf("agent calls after resume = %d, want %d (2 per task left)", got, want)
			}
			trs, err := ReadTrajectories(filepath.Join(dir, TrajectoriesFile))
			if err != nil {
				t.Fatal(err)
			}
			if len(trs) != len(tasks) {
				t.Fatalf("%d records, want %d", len(trs), len(tasks))
			}
			for i, tr := range trs {
				if tr.TaskID != tasks[i].ID {
					t.Fatalf("record %d is %s, want %s (one per task, in order)", i, tr.TaskID, tasks[i].ID)
				}
			}
			if _, err := os.Stat(dir + partialSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("staging dir left behind")
			}
			// Finished: a second run reuses it without calls.
			before = agent.calls.Load()
			res, err = r.RunDir(context.Background(), tasks, dir)
			if err != nil || !res.Reused || agent.calls.Load() != before {
				t.Fatalf("rerun: err=%v reused=%v", err, res.Reused)
			}
		})
	}
}

func TestRunDirGuards(t *testing.T) {
	tasks := []env.Task{testTask()}
	newRunner := func(name compress.Name, model Completer) *Runner {
		s, err := compress.New(name, nil, compress.Deps{Tokenizer: testTokenizer(t)})
		if err != nil {
			t.Fatal(err)
		}
		return &Runner{Agent: &Agent{Env: fakeEnv{obsWords: 3}, Model: model, Tokenizer: testTokenizer(t), Strategy: s}}
	}
	t.Run("trailing slash", func(t *testing.T) {
		dir := t.TempDir() + "/out/"
		if _, err := newRunner(compress.None, &fakeAgent{need: 1}).RunDir(context.Background(), tasks, dir); err != nil {
			t.Fatal(err)
		}
		if trs, err := ReadTrajectories(filepath.Join(dir, TrajectoriesFile)); err != nil || len(trs) != 1 {
			t.Fatalf("trajectories: %v %v", trs, err)
		}
	})
	t.Run("another configuration is not reused", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		if _, err := newRunner(compress.None, &fakeAgent{need: 1}).RunDir(context.Background(), tasks, dir); err != nil {
			t.Fatal(err)
		}
		_, err := newRunner(compress.FIFO, &fakeAgent{need: 1}).RunDir(context.Background(), tasks, dir)
		if err == nil || !strings.Contains(err.Error(), "another configuration") {
			t.Fatalf("want a refusal, got %v", err)
		}
	})
	t.Run("infra failures are retried on the next run", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		res, err := newRunner(compress.None, &fakeAgent{fail: fmt.Errorf("x: %w", llm.ErrUnavailable)}).RunDir(context.Background(), tasks, dir)
		if err != nil || res.Summary.InfraFailures != 1 || res.Summary.Scored != 0 {
			t.Fatalf("first run: %v %+v", err, res)
		}
		res, err = newRunner(compress.None, &fakeAgent{need: 1}).RunDir(context.Background(), tasks, dir)
		if err != nil || res.Summary.InfraFailures != 0 || res.Summary.Successes != 1 {
			t.Fatalf("second run: %v %+v", err, res.Summary)
		}
	})
}

func TestAgentLastStepNotice(t *testing.T) {
	tok := testTokenizer(t)
	for _, tc := range []struct {
		name        string
		heeds       bool
		wantSuccess bool
	}{
		{"an agent that heeds it submits at the limit", true, true},
		{"an agent that ignores it is cut off with nothing submitted", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{Env: fakeEnv{obsWords: 5}, Model: &fakeAgent{need: 100, heedsNotice: tc.heeds}, Tokenizer: tok, StepLimit: 4}
			tr, err := a.Run(context.Background(), testTask())
			if err != nil {
				t.Fatal(err)
			}
			if tr.Success != tc.wantSuccess || !tr.StepLimit || len(tr.Turns) != 4 {
				t.Fatalf("success %v, step limit %v, %d turns; want success %v at the limit of 4", tr.Success, tr.StepLimit, len(tr.Turns), tc.wantSuccess)
			}
			for i, turn := range tr.Turns {
				told := turn.Input[len(turn.Input)-1].Content == LastStepNotice
				if told != (i == 3) {
					t.Fatalf("turn %d: told it is the last = %v", i+1, told)
				}
			}
		})
	}
}
