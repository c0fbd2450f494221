package contrastive

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

func TestExtractJSON(t *testing.T) {
	cases := []struct {
		name, reply, want, err string
	}{
		{name: "clean", reply: `{"a":1}`, want: `{"a":1}`},
		{name: "fenced", reply: "```json\n{\"a\": {\"b\": \"}\"}}\n```", want: `{"a": {"b": "}"}}`},
		{name: "bare fence", reply: "Here:\n```\n{\"a\":1}\n```\nDone.", want: `{"a":1}`},
		{name: "prose around", reply: "Sure! The analysis is {\"a\":[1,2]} and that is all.", want: `{"a":[1,2]}`},
		{name: "prose braces first", reply: "Sets like {a, b} or {} aside: {\"a\":\"x\\\"}\"}", want: `{"a":"x\"}"}`},
		{name: "invalid candidate skipped", reply: `{"a":} then {"b":2}`, want: `{"b":2}`},
		{name: "cut off", reply: "```json\n{\"removals\": [{\"category\": \"x\"}", err: "not closed"},
		{name: "no object", reply: "I cannot analyse this.", err: "no valid JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := extractJSON(tc.reply)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseReplySchema(t *testing.T) {
	withoutKey := func(key string) string {
		r := gjson.Parse(goodUT)
		var parts []string
		r.ForEach(func(k, v gjson.Result) bool {
			if k.String() != key {
				parts = append(parts, k.Raw+":"+v.Raw)
			}
			return true
		})
		return "{" + strings.Join(parts, ",") + "}"
	}
	cases := []struct {
		name, step, reply string
		errs              []string
	}{
		{name: "ut ok", step: StepUT, reply: goodUT},
		{name: "co ok", step: StepCO, reply: goodCO},
		{name: "ut missing key", step: StepUT, reply: withoutKey("reliability_score"), errs: []string{`key "reliability_score" is missing`}},
		{name: "ut wrong types", step: StepUT,
			reply: strings.Replace(strings.Replace(goodUT, `"performance_regression": false`, `"performance_regression": "no"`, 1), `"baseline_env_steps": 3`, `"baseline_env_steps": 3.5`, 1),
			errs:  []string{`"performance_regression" must be true or false, not a string`, `"baseline_env_steps" must be an integer or null`}},
		{name: "ut null steps allowed", step: StepUT, reply: strings.Replace(goodUT, `"step_ratio": 1.33`, `"step_ratio": null`, 1)},
		{name: "ut recommendation not a string", step: StepUT,
			reply: strings.Replace(goodUT, `"remediation_recommendations": [`, `"remediation_recommendations": [{"x":1}, `, 1),
			errs:  []string{"remediation_recommendations[0] must be a string, not an object"}},
		{name: "ut score out of range", step: StepUT, reply: strings.Replace(goodUT, `"reliability_score": 0.9`, `"reliability_score": 9`, 1),
			errs: []string{"outside [0, 1]"}},
		{name: "co missing arrays", step: StepCO, reply: `{"removals": {}, "overview": []}`,
			errs: []string{`"removals" must be an array, not an object`, `key "keeps" is missing`, `key "rules" is missing`, `"overview" must be an object`}},
		{name: "co removal without pattern", step: StepCO, reply: `{"removals":[{"category":"x"}],"keeps":[],"rules":[]}`,
			errs: []string{`removals[0] must be an object with a string "pattern"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseReply(tc.step, tc.reply)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not say %q", err, e)
				}
			}
		})
	}
}

func utPair() []Pair { return []Pair{{Baseline: baselineRun(), Compressed: compressedRun()}} }

func TestAnalyzeReplies(t *testing.T) {
	missing := strings.Replace(goodUT, `"reliability_score": 0.9,`, "", 1)
	cases := []struct {
		name    string
		step    string
		model   *fakeModel
		calls   int
		status  string
		reason  string // part of the rejection reason
		repair  string // part of the repair request
		checkOK func(t *testing.T, f Feedback)
	}{
		{name: "clean UT", step: StepUT, model: replies(goodUT), calls: 1, status: StatusOK,
			checkOK: func(t *testing.T, f Feedback) {
				if !reflect.DeepEqual(f.MissingFacts, []string{"The capital of Veloria is Marnth.", "state answers so far: not carried"}) {
					t.Errorf("MissingFacts = %q", f.MissingFacts)
				}
				if len(f.Recommendations) != 2 || !strings.HasPrefix(f.Recommendations[0], "Copy verbatim") {
					t.Errorf("Recommendations = %q", f.Recommendations)
				}
				if !reflect.DeepEqual(f.RootCauses, []string{"Missing Critical Fact", "Unnecessary Re-discovery"}) {
					t.Errorf("RootCauses = %q", f.RootCauses)
				}
				if f.Reliability != 0.9 || f.GuidelineID != "g-hist-0" || f.CompressedChars != len(lossySummary) {
					t.Errorf("Reliability %v, GuidelineID %q, CompressedChars %d", f.Reliability, f.GuidelineID, f.CompressedChars)
				}
				if !gjson.ValidBytes(f.Analysis) || gjson.GetBytes(f.Analysis, "task_name").String() != "qa-0007" {
					t.Errorf("Analysis = %s", f.Analysis)
				}
			}},
		{name: "fenced CO", step: StepCO, model: replies("```json\n" + goodCO + "\n```"), calls: 1, status: StatusOK,
			checkOK: func(t *testing.T, f Feedback) {
				want := []Removal{{"narrative", "per-step reasoning sentences", "drop"}, {"tool-logs", "list of issued searches", "drop"}}
				if !reflect.DeepEqual(f.Removals, want) {
					t.Errorf("Removals = %+v", f.Removals)
				}
				if len(f.Keeps) != 1 || !reflect.DeepEqual(f.Keeps[0].Evidence, []string{"The capital of Veloria is Marnth."}) {
					t.Errorf("Keeps = %+v", f.Keeps)
				}
				if len(f.Rules) != 2 || f.Reliability != 0.8 {
					t.Errorf("Rules %q, Reliability %v", f.Rules, f.Reliability)
				}
			}},
		{name: "prose around", step: StepUT, model: replies("Here is my analysis.\n" + goodUT + "\nHope it helps."), calls: 1, status: StatusOK},
		{name: "missing key repaired", step: StepUT, model: replies(missing, goodUT), calls: 2, status: StatusOK,
			repair: `key "reliability_score" is missing`},
		{name: "twice bad", step: StepUT, model: replies("no idea", "still no idea"), calls: 2, status: StatusRejected,
			reason: "after one repair request: the reply holds no valid JSON object", repair: "no valid JSON object"},
		{name: "co twice wrong schema", step: StepCO, model: replies(`{"rules":"x"}`), calls: 2, status: StatusRejected,
			reason: `key "removals" is missing`},
		{name: "infra error", step: StepUT, calls: 1, status: StatusRejected, reason: "analyzer unavailable",
			model: &fakeModel{answer: func(int, llm.Request) (string, error) {
				return "", fmt.Errorf("analyzer call: 503 after 5 retries: %w", llm.ErrUnavailable)
			}}},
		{name: "infra error on repair", step: StepUT, calls: 2, status: StatusRejected, reason: "analyzer unavailable",
			model: &fakeModel{answer: func(call int, _ llm.Request) (string, error) {
				if call == 0 {
					return "prose", nil
				}
				return "", llm.ErrUnavailable
			}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items := utPair()
			if tc.step == StepCO {
				items = []Pair{{Compressed: compressedRun()}}
			}
			fs, err := Analyze(context.Background(), tc.model, tc.step, items, Options{Round: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != 1 {
				t.Fatalf("%d records", len(fs))
			}
			f := fs[0]
			if len(tc.model.reqs) != tc.calls {
				t.Errorf("%d calls, want %d", len(tc.model.reqs), tc.calls)
			}
			for _, r := range tc.model.reqs {
				if r.Purpose != llm.PurposeAnalyzer {
					t.Errorf("purpose %q", r.Purpose)
				}
			}
			if f.Status != tc.status || !strings.Contains(f.Reason, tc.reason) {
				t.Errorf("status %q reason %q, want %q containing %q", f.Status, f.Reason, tc.status, tc.reason)
			}
			if f.ID == "" || f.Step != tc.step || f.Round != 2 || f.TaskID != "qa-0007" || f.Kind != compress.KindHistory {
				t.Errorf("record header: %+v", f)
			}
			if tc.status == StatusRejected && (len(f.Analysis) > 0 || len(f.Rules)+len(f.Recommendations) > 0) {
				t.Errorf("rejected record carries an analysis: %s", f.Analysis)
			}
			if tc.repair != "" {
				if len(tc.model.reqs) < 2 {
					t.Fatal("no repair request")
				}
				first, second := tc.model.reqs[0].Messages, tc.model.reqs[1].Messages
				if len(second) != 3 || second[0].Content != first[0].Content || second[1].Role != "assistant" || second[2].Role != "user" {
					t.Fatalf("repair request messages: %+v", second)
				}
				if second[1].Content != tc.model.answerOf(0) {
					t.Errorf("repair request does not carry the bad reply: %q", second[1].Content)
				}
				if !strings.Contains(second[2].Content, tc.repair) || !strings.Contains(second[2].Content, "only the JSON object") {
					t.Errorf("repair request %q does not say %q", second[2].Content, tc.repair)
				}
			}
			if tc.checkOK != nil {
				tc.checkOK(t, f)
			}
			if f.Calls != tc.calls-failedCalls(tc.model) {
				t.Errorf("Calls = %d", f.Calls)
			}
		})
	}
}

// answerOf replays the scripted answer of a call.
func (f *fakeModel) answerOf(call int) string {
	s, _ := f.answer(call, llm.Request{})
	return s
}

func failedCalls(f *fakeModel) int {
	n := 0
	for i := range f.reqs {
		if _, err := f.answer(i, llm.Request{}); err != nil {
			n++
		}
	}
	return n
}

func TestAnalyzeErrors(t *testing.T) {
	t.Run("non-infra error stops", func(t *testing.T) {
		m := &fakeModel{answer: func(int, llm.Request) (string, error) { return "", errors.New("400: missing role header") }}
		_, err := Analyze(context.Background(), m, StepUT, utPair(), Options{})
		if err == nil || !strings.Contains(err.Error(), "qa-0007") {
			t.Fatalf("err = %v, want an error naming the task", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m := &fakeModel{answer: func(int, llm.Request) (string, error) { return "", llm.ErrUnavailable }}
		if _, err := Analyze(ctx, m, StepUT, utPair(), Options{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		m := replies(goodUT)
		if _, err := Analyze(context.Background(), m, "xx", utPair(), Options{}); err == nil {
			t.Error("unknown step accepted")
		}
		if _, err := Analyze(context.Background(), m, StepUT, []Pair{{Compressed: compressedRun()}}, Options{}); err == nil || !strings.Contains(err.Error(), "item 0") {
			t.Errorf("UT item without baseline: %v", err)
		}
		if _, err := Analyze(context.Background(), m, StepCO, nil, Options{Kind: "both"}); err == nil {
			t.Error("unknown kind accepted")
		}
		if len(m.reqs) != 0 {
			t.Error("calls made despite bad arguments")
		}
	})
}

func TestAnalyzeKeepsOrder(t *testing.T) {
	var items []Pair
	for i := range 12 {
		c := compressedRun()
		c.TaskID = fmt.Sprintf("t%02d", i)
		items = append(items, Pair{Compressed: c})
	}
	// Earlier items answer later, so completion order is reversed.
	m := &fakeModel{answer: func(_ int, req llm.Request) (string, error) {
		p := req.Messages[0].Content
		for i := range items {
			if strings.Contains(p, fmt.Sprintf("t%02d", i)) {
				time.Sleep(time.Duration(12-i) * time.Millisecond)
			}
		}
		return goodCO, nil
	}}
	// The CO prompt does not name the task: tag each run's summary instead.
	for i, it := range items {
		it.Compressed.Events[0].Output = fmt.Sprintf("<HISTORY_SUMMARY>\nrun t%02d\n</HISTORY_SUMMARY>", i)
	}
	fs, err := Analyze(context.Background(), m, StepCO, items, Options{Concurrency: 6})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if want := fmt.Sprintf("t%02d", i); f.TaskID != want || f.Status != StatusOK {
			t.Errorf("record %d is %s (%s), want %s ok", i, f.TaskID, f.Status, want)
		}
	}
	if fs[0].ID == fs[1].ID {
		t.Error("records of different tasks share an id")
	}
}

func TestAnalysisPromptRegression(t *testing.T) {
	b := baselineRun()
	c := compressedRun()
	c.Success = true
	c.Metrics.Steps = 6
	p, err := AnalysisPrompt(StepUT, Pair{Baseline: b, Compressed: c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline_success=true optimized_success=true", "\nbaseline_env_steps=3 optimized_env_steps=6\n",
		"step_ratio=2.00 performance_regression=true", "\nQ1: What is the capital of Veloria?\n"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	b.Metrics.Steps = 0
	if p, _ = AnalysisPrompt(StepUT, Pair{Baseline: b, Compressed: c}, Options{}); !strings.Contains(p, "step_ratio=null performance_regression=false") {
		t.Error("a baseline of zero steps should give step_ratio=null")
	}
}

// TestPromptSize checks the bound on a long run: 30 steps of 6 KB
// observations on both sides stay under ~60k tokens.
func TestPromptSize(t *testing.T) {
	long := func(t *rollout.Trajectory) {
		obs := strings.Repeat("[1] (doc d00001) Veloria\nThe capital of Veloria is Marnth. ", 150)
		for len(t.Turns) < 30 {
			tr := t.Turns[0]
			tr.Step = len(t.Turns) + 1
			t.Turns = append(t.Turns, tr)
		}
		for i := range t.Turns {
			t.Turns[i].Observation = obs
			t.Turns[i].Step = i + 1
		}
	}
	b, c := baselineRun(), compressedRun()
	long(b)
	long(c)
	p, err := AnalysisPrompt(StepUT, Pair{Baseline: b, Compressed: c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := llm.NewTokenizer("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	n := tok.Count(p)
	t.Logf("prompt: %d chars, %d tokens", len(p), n)
	if n > 60_000 {
		t.Errorf("prompt of %d tokens", n)
	}
}
