package contrastive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/sourcegraph/conc/pool"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/templates"
)

// Completer answers chat requests (an llm.Client, or a fake in tests).
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// DefaultConcurrency bounds the analysis calls in flight when Options does
// not; the client limits its endpoint on its own as well.
const DefaultConcurrency = 4

// Options configure Analyze. Zero values take the defaults.
type Options struct {
	// Kind is the guideline kind being optimized: KindHistory (default)
	// or KindObservation.
	Kind  string
	Round int
	// StepRatio marks a UT pair that succeeded as a performance regression
	// (DefaultStepRatio).
	StepRatio   float64
	Concurrency int
	// MaxHistoryChars bounds each rendered history (DefaultMaxHistoryChars).
	MaxHistoryChars int
}

func (o Options) withDefaults() Options {
	if o.Kind == "" {
		o.Kind = compress.KindHistory
	}
	if o.StepRatio <= 0 {
		o.StepRatio = DefaultStepRatio
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxHistoryChars <= 0 {
		o.MaxHistoryChars = DefaultMaxHistoryChars
	}
	return o
}

func checkStepKind(step, kind string) error {
	if step != StepUT && step != StepCO {
		return fmt.Errorf("analysis step %q: want %q or %q", step, StepUT, StepCO)
	}
	if kind != compress.KindHistory && kind != compress.KindObservation {
		return fmt.Errorf("guideline kind %q: want %q or %q", kind, compress.KindHistory, compress.KindObservation)
	}
	return nil
}

func checkItem(step string, it Pair) error {
	if it.Compressed == nil || (step == StepUT && it.Baseline == nil) {
		return fmt.Errorf("a %s item needs the compressed run (and for %s its baseline)", step, StepUT)
	}
	return nil
}

// Analyze asks the analyzer about each item (UT: baseline against
// compressed run; CO: the compressed run alone), concurrently, and returns
// one feedback record per item in input order. A reply that is not the
// schema gets one repair request; if that fails too, or the endpoint is
// unavailable, the record is rejected with its reason and the rest go on.
// Only a cancelled context or an error that would fail every call (a bad
// request, a broken template) stops it.
func Analyze(ctx context.Context, c Completer, step string, items []Pair, opts Options) ([]Feedback, error) {
	opts = opts.withDefaults()
	if err := checkStepKind(step, opts.Kind); err != nil {
		return nil, err
	}
	for i, it := range items {
		if err := checkItem(step, it); err != nil {
			return nil, fmt.Errorf("analysis item %d: %w", i, err)
		}
	}
	out := make([]Feedback, len(items))
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(opts.Concurrency)
	for i, it := range items {
		// Each goroutine owns its slot, which keeps the output in input order.
		p.Go(func(ctx context.Context) error {
			fb, err := analyzeOne(ctx, c, step, it, opts)
			if err != nil {
				return fmt.Errorf("analyze task %s: %w", it.Compressed.TaskID, err)
			}
			out[i] = fb
			return nil
		})
	}
	if err := p.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func analyzeOne(ctx context.Context, c Completer, step string, it Pair, opts Options) (Feedback, error) {
	t := it.Compressed
	fb := Feedback{
		Step: step, Round: opts.Round, TaskID: t.TaskID, Kind: opts.Kind,
		GuidelineID:     guidelineID(t, opts.Kind),
		CompressedChars: meanOutputChars(t, opts.Kind),
	}
	if step == StepUT {
		fb.Regression = isRegression(it.Baseline, t, opts.StepRatio)
	}
	prompt, err := AnalysisPrompt(step, it, opts)
	if err != nil {
		return fb, err
	}
	msgs := []llm.Message{{Role: "user", Content: prompt}}
	reply, err := ask(ctx, c, msgs, &fb)
	if err != nil {
		return fb, rejectInfra(ctx, &fb, err)
	}
	r, perr := parseReply(step, reply)
	if perr != nil {
		reportAnalysis(c, t.TaskID, reply, perr)
		// One repair: the model sees its answer and exactly what is wrong.
		msgs = append(msgs,
			llm.Message{Role: "assistant", Content: reply},
			llm.Message{Role: "user", Content: repairRequest(perr)})
		if reply, err = ask(ctx, c, msgs, &fb); err != nil {
			return fb, rejectInfra(ctx, &fb, err)
		}
		if r, perr = parseReply(step, reply); perr != nil {
			reportAnalysis(c, t.TaskID, reply, perr)
			reject(&fb, "analysis reply unusable after one repair request: "+perr.Error())
			return fb, nil
		}
	}
	fb.Status = StatusOK
	fill(&fb, step, r)
	fb.setID()
	return fb, nil
}

func reportAnalysis(c Completer, task, reply string, err error) {
	llm.Report(c, llm.MalformedReply{Purpose: llm.PurposeAnalyzer, Kind: llm.MalformedAnalysis,
		Detail: "task " + task + ": " + err.Error(), Raw: reply})
}

// ask makes one analyzer call and accounts for it in fb.
func ask(ctx context.Context, c Completer, msgs []llm.Message, fb *Feedback) (string, error) {
	resp, err := c.Complete(ctx, llm.Request{Purpose: llm.PurposeAnalyzer, Messages: msgs})
	if err != nil {
		return "", err
	}
	fb.Calls++
	fb.Usage.PromptTokens += resp.Usage.PromptTokens
	fb.Usage.CompletionTokens += resp.Usage.CompletionTokens
	fb.Raw = cut(resp.Message.Content, rawLimit)
	return resp.Message.Content, nil
}

// rejectInfra records an unavailable endpoint as a rejected record and
// passes every other error (cancellation included) up.
func rejectInfra(ctx context.Context, fb *Feedback, err error) error {
	if ctx.Err() != nil || !errors.Is(err, llm.ErrUnavailable) {
		return err
	}
	fb.Infra = true
	reject(fb, "analyzer unavailable: "+err.Error())
	return nil
}

func reject(fb *Feedback, reason string) {
	fb.Status = StatusRejected
	fb.Reason = reason
	fb.setID()
	slog.Warn("analysis rejected", "step", fb.Step, "task", fb.TaskID, "reason", reason)
}

func repairRequest(problem error) string {
	return "Your reply could not be used: " + problem.Error() + ".\n" +
		"Answer again with only the JSON object described above, every key present with the type given, " +
		"and no text or code fences around it."
}

// AnalysisPrompt renders the analysis prompt of one item (analysis_ut.tmpl
// or analysis_co.tmpl).
func AnalysisPrompt(step string, it Pair, opts Options) (string, error) {
	opts = opts.withDefaults()
	if err := checkStepKind(step, opts.Kind); err != nil {
		return "", err
	}
	if err := checkItem(step, it); err != nil {
		return "", err
	}
	c := it.Compressed
	if step == StepCO {
		return templates.Render("analysis_co.tmpl", map[string]any{
			"kind":               opts.Kind,
			"task":               c.Task,
			"compressed_history": strings.TrimRight(CompressedHistory(c, opts.MaxHistoryChars), "\n"),
		})
	}
	b := it.Baseline
	var ratio any // nil renders as null
	if bs := b.Metrics.Steps; bs > 0 {
		ratio = fmt.Sprintf("%.2f", float64(c.Metrics.Steps)/float64(bs))
	}
	return templates.Render("analysis_ut.tmpl", map[string]any{
		"kind":                   opts.Kind,
		"task_name":              c.TaskID,
		"task":                   c.Task,
		"baseline_success":       b.Success,
		"optimized_success":      c.Success,
		"baseline_env_steps":     b.Metrics.Steps,
		"optimized_env_steps":    c.Metrics.Steps,
		"step_ratio":             ratio,
		"performance_regression": isRegression(b, c, opts.StepRatio),
		"baseline_history":       strings.TrimRight(BaselineHistory(b, opts.MaxHistoryChars), "\n"),
		"optimized_history":      strings.TrimRight(CompressedHistory(c, opts.MaxHistoryChars), "\n"),
		"failure_report":         failureReport(b, c),
	})
}

// failureReport states the outcome of both runs, answer by answer.
func failureReport(b, c *rollout.Trajectory) string {
	var sb strings.Builder
	line := func(name string, t *rollout.Trajectory) {
		fmt.Fprintf(&sb, "%s: success=%t em=%.2f f1=%.2f steps=%d", name, t.Success, t.Score.EM, t.Score.F1, t.Metrics.Steps)
		if t.StepLimit {
			sb.WriteString(" (stopped at the step limit)")
		}
		for i, q := range t.Score.PerQuestion {
			fmt.Fprintf(&sb, "; Q%d answered %q (em %.0f)", i+1, q.Answer, q.EM)
		}
		sb.WriteString("\n")
	}
	line("baseline", b)
	line("compressed", c)
	var hist, obs int
	for _, ev := range c.Events {
		if ev.Kind == compress.KindHistory {
			hist++
		} else {
			obs++
		}
	}
	fmt.Fprintf(&sb, "compressions in the compressed run: %d history, %d observation", hist, obs)
	return sb.String()
}

func guidelineID(t *rollout.Trajectory, kind string) string {
	if kind == compress.KindObservation {
		return t.ObservationGuidelineID
	}
	return t.HistoryGuidelineID
}

// meanOutputChars is the mean length of the run's compressor outputs of kind.
func meanOutputChars(t *rollout.Trajectory, kind string) int {
	n, sum := 0, 0
	for _, ev := range t.Events {
		if ev.Kind == kind {
			n++
			sum += utf8.RuneCountInString(ev.Output)
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + " [...]"
}
