package eval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// fakeJudge answers every request with reply.
type fakeJudge struct{ reply string }

func (f fakeJudge) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{Message: llm.Message{Role: "assistant", Content: f.reply}}, nil
}

func call(name, args string) llm.Message {
	return llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: name, Arguments: args}}}
}

func text(s string) llm.Message { return llm.Message{Role: "assistant", Content: s} }

func TestAgree(t *testing.T) {
	tie, a := fakeJudge{`{"winner": "tie", "reason": "same"}`}, fakeJudge{"```json\n{\"winner\": \"A\"}\n```"}
	for _, c := range []struct {
		name    string
		judge   rollout.Completer
		x, y    llm.Message
		want    float64
		wantHow string
	}{
		{"same tool, keys reordered and spaced", nil, call("search", `{"query":"x","k":3}`), call("search", `{ "k": 3, "query": "x" }`), 1, AgreeTool},
		{"same tool, other arguments", nil, call("search", `{"query":"x"}`), call("search", `{"query":"y"}`), 0, AgreeTool},
		{"other tool", nil, call("search", `{"query":"x"}`), call("finish", `{"query":"x"}`), 0, AgreeTool},
		{"tool call against text", tie, call("search", `{}`), text("search"), 0, AgreeTool},
		{"text, no judge, equal but for case and punctuation", nil, text("The Vell, of course."), text("the vell of course"), 1, AgreeExact},
		{"text, no judge, different", nil, text("the Vell"), text("the Quay"), 0, AgreeExact},
		{"text, judge says tie", tie, text("the Vell"), text("It is the Vell."), 1, AgreeJudge},
		{"text, judge prefers one", a, text("the Vell"), text("unknown"), 0, AgreeJudge},
		{"text, judge unreadable", fakeJudge{"no idea"}, text("a"), text("a"), 0, AgreeJudge},
	} {
		got, how, err := agree(context.Background(), c.judge, ReplayRequest{Task: "Q1: What is the river of Ostrela?"}, c.x, c.y)
		if err != nil || got != c.want || how != c.wantHow {
			t.Errorf("%s: %v %s %v, want %v %s", c.name, got, how, err, c.want, c.wantHow)
		}
	}
}

// writeSessions writes sessions s1..s9 of 1..9 turns each as a session log.
func writeSessions(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for n := 1; n <= 9; n++ {
		tr := &rollout.Trajectory{TaskID: fmt.Sprintf("s%d", n), Task: "Q1: What is the river of Ostrela?", Split: "serve"}
		for k := range n {
			out := call("search", fmt.Sprintf(`{"query":"q%d"}`, k))
			out.ToolCalls[0].ID = fmt.Sprintf("c%d", k)
			tr.Turns = append(tr.Turns, rollout.Turn{Step: k + 1, Output: out, Observation: fmt.Sprintf("passage %d", k)})
		}
		line, err := rollout.EncodeTrajectory(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "trajectories.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSampleReplay(t *testing.T) {
	path := writeSessions(t)
	reqs, err := SampleReplay(path, 6, 42)
	if err != nil {
		t.Fatal(err)
	}
	// Three strata of lengths 1-3, 4-6 and 7-9, two requests from each.
	strata := map[int]int{}
	for _, q := range reqs {
		strata[(q.Turns-1)/3]++
		if got := slices.IndexFunc(q.History, func(m llm.Message) bool { return m.Role == "assistant" }); got != 0 {
			t.Errorf("%s: history starts at %d", q.ID, got)
		}
		turns := 0
		for _, m := range q.History {
			if m.Role == "assistant" {
				turns++
			}
		}
		if turns != q.Step || q.Task == "" || len(q.History) != 2*q.Step || q.History[1].ToolCallID != "c0" || q.History[1].Content != "passage 0" {
			t.Errorf("%s: %d turns, %d messages, task %q; want %d turns with their tool results", q.ID, turns, len(q.History), q.Task, q.Step)
		}
	}
	if len(reqs) != 6 || strata[0] != 2 || strata[1] != 2 || strata[2] != 2 {
		t.Errorf("sampled %d requests by stratum %v, want 2 from each of 3", len(reqs), strata)
	}
	again, _ := SampleReplay(path, 6, 42)
	other, _ := SampleReplay(path, 6, 7)
	ids := func(rs []ReplayRequest) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if !slices.Equal(ids(reqs), ids(again)) || slices.Equal(ids(reqs), ids(other)) {
		t.Errorf("seeded sampling: %v, again %v, seed 7 %v", ids(reqs), ids(again), ids(other))
	}
	// Short strata run out: the long sessions make up the rest; at most
	// every request (45).
	if all, _ := SampleReplay(path, 100, 42); len(all) != 45 {
		t.Errorf("sampled %d of 45 requests", len(all))
	}
	if _, err := SampleReplay(filepath.Join(t.TempDir(), "none.jsonl"), 5, 1); err == nil {
		t.Error("a missing session log sampled without error")
	}
}

// TestReplayMetric: agreement is computed over the replayed requests,
// paired, written and read back, and gate rules name it.
func TestReplayMetric(t *testing.T) {
	r := constructed(t, 4, func(int) bool { return true }, func(int) bool { return true }, func(int) float64 { return 1 }, func(int) float64 { return 1 })
	reqs := []string{"s#1", "s#2", "s#3", "s#4", "s#5"}
	r.Summary.Replay = &ReplaySummary{Sessions: "log", Requests: reqs}
	for i, q := range reqs {
		r.Replay = append(r.Replay, ReplayOutcome{Candidate: "ref", Request: q, Agreement: 1},
			ReplayOutcome{Candidate: "cand", Request: q, Agreement: float64(i % 2)})
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	back, err := Load(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	arm, _ := back.Arm("cand")
	diff := back.Comparisons[0].Metrics[MetricAgreement].Diff
	if arm.Metrics[MetricAgreement].Point != 0.4 || diff.Point != -0.6 || !slices.Contains(back.MetricNames(), MetricAgreement) {
		t.Fatalf("agreement %v, diff %v", arm.Metrics[MetricAgreement], diff)
	}
	rule, _ := ParseRule("agreement >= -0.02")
	vs, err := Gate(back, "cand", back, "ref", []Rule{rule})
	if err != nil || vs[0].Pass {
		t.Errorf("gate: %+v, %v; want a failing verdict", vs, err)
	}
	plain := constructed(t, 4, func(int) bool { return true }, func(int) bool { return true }, func(int) float64 { return 1 }, func(int) float64 { return 1 })
	if v := Judge(rule, plain.Comparisons[0]); v.Pass || !strings.Contains(v.Reason, "--replay") {
		t.Errorf("agreement rule without a replay: %+v", v)
	}
	if _, err := Gate(back, "cand", plain, "ref", []Rule{rule}); err == nil || !strings.Contains(err.Error(), "same requests") {
		t.Errorf("gate across a replay and none: %v", err)
	}
}
