package synth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/logtest"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/templates"
)

// embedded is the embedded model with one client per role.
type embedded struct {
	agent, compressor, judge, embedder, generator, optimizer *llm.Client
	tok                                                      *llm.Tokenizer
}

func startEmbedded(t testing.TB) *embedded {
	t.Helper()
	s, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &embedded{}
	for name, c := range map[string]**llm.Client{"agent": &e.agent, "compressor": &e.compressor, "judge": &e.judge, "embedder": &e.embedder, "generator": &e.generator, "optimizer": &e.optimizer} {
		cl, err := llm.NewClient(name, llm.RoleConfig{BaseURL: s.URL(), Model: sim.ModelName, MaxRetries: -1, Concurrency: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		*c = cl
	}
	e.tok = e.agent.Tokenizer()
	return e
}

// compile validates a history guideline source.
func compile(t testing.TB, src string) *compress.Prompt {
	t.Helper()
	tpl, rep := guideline.Validate(guideline.KindHistory, src)
	if !rep.OK {
		t.Fatalf("guideline: %v", rep.Problems)
	}
	return &compress.Prompt{ID: rep.ID, Template: tpl}
}

// planAware is the built-in plan-aware teacher prompt.
func planAware(t testing.TB) *compress.Prompt {
	src, err := templates.Source("history_plan_aware.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, src)
}

// planBlind is the same prompt told to ignore the plan it is shown.
func planBlind(t testing.TB) *compress.Prompt {
	src, err := templates.Source("history_plan_aware.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, strings.Replace(src, "Keep what the next plan steps need:", "Ignore the plan: it does not tell what matters. Keep what seems important:", 1))
}

func (e *embedded) executor(t testing.TB, teacher *compress.Prompt, k int) *Executor {
	t.Helper()
	s, err := compress.New(compress.PlanAware, &compress.PlanAwareParams{K: k}, compress.Deps{
		Compressor: e.compressor, Tokenizer: e.tok, History: teacher, HistoryThreshold: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Executor{Agent: e.agent, Tokenizer: e.tok, Teacher: s, Judge: e.judge, Embedder: e.embedder, StepLimit: 30, Threshold: DefaultThreshold}
}

// generated writes n workflows of the embedded generator into a directory
// and returns its workflows.jsonl.
func (e *embedded) generated(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := Generate(context.Background(), e.generator, GenerateConfig{Count: n, Seed: 3, Settings: Settings{}.WithDefaults(), Concurrency: 4}, dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, WorkflowsFile)
}

func TestExecuteFollowsTheWorkflow(t *testing.T) {
	e := startEmbedded(t)
	wfs := e.generated(t, 1)
	b, err := os.ReadFile(wfs)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Parse([]byte(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := e.executor(t, planAware(t), 99).Execute(t.Context(), &w)
	if err != nil {
		t.Fatal(err)
	}
	// With every plan step in the window nothing the steps need is lost.
	if !ex.Full.Success || !ex.Compressed.Success || !ex.Accepted || ex.Similarity != 1 {
		t.Fatalf("full %+v compressed %+v accepted %v rejections %+v", ex.Full, ex.Compressed, ex.Accepted, ex.Rejections)
	}
	if len(ex.Steps) == 0 {
		t.Fatal("no compression event")
	}
	for i, st := range ex.Steps {
		// The plan window is empty only once every step is answered.
		if st.Ratio <= 0 || st.Ratio >= 1 || len(st.Plan) > 0 && !strings.Contains(st.Prompt[0].Content, st.Plan[0]) || len(st.Plan) == 0 && i != len(ex.Steps)-1 {
			t.Fatalf("step %+v", st)
		}
	}
	for _, f := range w.Checker.Facts {
		if !strings.Contains(ex.Full.Output, f) {
			t.Fatalf("full output %q lacks %q", ex.Full.Output, f)
		}
	}
	if len(ex.Judge) != 2 || ex.Judge[0].CandidateFirst == ex.Judge[1].CandidateFirst {
		t.Fatalf("judge %+v: want both orders", ex.Judge)
	}
	for _, role := range []string{llm.RoleAgent, llm.RoleCompressor, llm.RoleJudge, llm.RoleEmbedder} {
		if ex.Usage[role].Calls == 0 {
			t.Fatalf("usage %+v: no %s call", ex.Usage, role)
		}
	}
}

// runAll runs the workflows of wfs with x into a fresh directory.
func runAll(t testing.TB, x *Executor, wfs string) RunSummary {
	t.Helper()
	sum, err := Run(t.Context(), x, RunOptions{Workflows: wfs, Dir: t.TempDir(), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// spiteful is a judge that always rates the compressed output worse: it
// names the output the prompt labels the reference as the winner.
type spiteful struct{}

func (spiteful) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	p := req.Messages[0].Content
	w := "B"
	if strings.Contains(p, "OUTPUT_A ("+labelReference+")") {
		w = "A"
	}
	return llm.Response{Message: llm.Message{Role: "assistant", Content: `{"winner": "` + w + `", "reason": "the reference is better"}`}}, nil
}

// growing is a teacher that returns its whole prompt twice: the summary
// is larger than the context it replaces.
type growing struct{}

func (growing) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	p := req.Messages[0].Content
	return llm.Response{Message: llm.Message{Role: "assistant", Content: p + "\n" + p}}, nil
}

// TestAcceptanceFilter checks each test of the filter by ablation on the
// embedded model: the plan-aware teacher against one told to ignore the
// plan, a threshold no cosine reaches, a judge that always rates the
// compressed output worse, and a teacher whose summaries grow the context.
func TestAcceptanceFilter(t *testing.T) {
	e := startEmbedded(t)
	wfs := e.generated(t, 12)
	aware := runAll(t, e.executor(t, planAware(t), compress.DefaultPlanK), wfs)
	if aware.Executed != 12 || aware.Accepted == 0 || aware.Compressions == 0 {
		t.Fatalf("plan-aware baseline: %+v", aware)
	}
	tests := []struct {
		name  string
		edit  func(x *Executor)
		check func(t *testing.T, s RunSummary)
	}{
		{"plan-blind teacher accepts less", func(x *Executor) { *x = *e.executor(t, planBlind(t), compress.DefaultPlanK) }, func(t *testing.T, s RunSummary) {
			t.Logf("acceptance: plan-blind %d/%d, plan-aware %d/%d", s.Accepted, s.Executed, aware.Accepted, aware.Executed)
			if s.AcceptanceRate >= aware.AcceptanceRate {
				t.Fatalf("plan-blind acceptance %.3f, plan-aware %.3f", s.AcceptanceRate, aware.AcceptanceRate)
			}
		}},
		{"threshold above 1 accepts nothing", func(x *Executor) { x.Threshold = 1.0001 }, func(t *testing.T, s RunSummary) {
			if s.Accepted != 0 || s.Rejections[TestSimilarity] != s.Executed {
				t.Fatalf("%+v", s)
			}
		}},
		{"a judge always rating it worse accepts nothing", func(x *Executor) { x.Judge = spiteful{} }, func(t *testing.T, s RunSummary) {
			if s.Accepted != 0 || s.Rejections[TestJudge] != s.Executed {
				t.Fatalf("%+v", s)
			}
		}},
		{"a compression growing the context is rejected for its ratio", func(x *Executor) {
			s, err := compress.New(compress.PlanAware, nil, compress.Deps{Compressor: growing{}, Tokenizer: e.tok, History: planAware(t), HistoryThreshold: 1})
			if err != nil {
				t.Fatal(err)
			}
			x.Teacher = s
		}, func(t *testing.T, s RunSummary) {
			if s.Accepted != 0 || s.Rejections[TestRatio] != s.Executed || s.MeanRatio <= 1 {
				t.Fatalf("%+v", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := e.executor(t, planAware(t), compress.DefaultPlanK)
			tc.edit(x)
			s := runAll(t, x, wfs)
			if s.Executed != 12 {
				t.Fatalf("executed %d of 12", s.Executed)
			}
			tc.check(t, s)
		})
	}
}

// TestRunRejectsBadWorkflows feeds lines that are not workflows among
// good ones: each is rejected with its reason and the run goes on.
func TestRunRejectsBadWorkflows(t *testing.T) {
	e := startEmbedded(t)
	good, err := os.ReadFile(e.generated(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(good)), "\n")
	noInstr := strings.Replace(lines[1], `"plan":["t1"`, `"plan":["t9"`, 1)
	if noInstr == lines[1] {
		t.Fatalf("fixture: %s", lines[1])
	}
	bad := []struct{ line, want string }{
		{`["a JSON array"]`, "got array, want object"},
		{`{"id": "wf-x", "domain": "office"}`, "input: missing (required)"},
		{noInstr, `plan[0]: step "t9" refers to no instruction`},
	}
	var in []string
	in = append(in, lines[0])
	for _, b := range bad {
		in = append(in, b.line)
	}
	in = append(in, lines[1], lines[0])
	wfs := filepath.Join(t.TempDir(), WorkflowsFile)
	if err := os.WriteFile(wfs, []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs := logtest.Capture(t, slog.LevelWarn)
	sum, err := Run(t.Context(), e.executor(t, planAware(t), compress.DefaultPlanK), RunOptions{Workflows: wfs, Dir: dir, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Read != 6 || sum.Executed != 2 || sum.Rejections[RejectInvalid] != 3 || sum.Invalid != 3 || sum.Duplicates != 1 {
		t.Fatalf("summary %+v", sum)
	}
	// Each line not executed is on the terminal with its file and line.
	for _, w := range []string{wfs + ":2: invalid workflow", wfs + ":4: invalid workflow", fmt.Sprintf(`%s:6: workflow id \"%s\" is already line 1`, wfs, exsID(t, lines[0]))} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("logs lack %q:\n%s", w, logs)
		}
	}
	exs := readLines[Execution](t, filepath.Join(dir, ExecutionsFile))
	for i, b := range bad {
		ex := exs[i+1]
		if ex.Executed || len(ex.Rejections) != 1 || ex.Rejections[0].Test != RejectInvalid || !strings.Contains(ex.Rejections[0].Detail, b.want) || !strings.Contains(ex.Rejections[0].Detail, fmt.Sprintf(":%d:", i+2)) {
			t.Errorf("line %d: %+v, want %q", i+2, ex, b.want)
		}
	}
	if exs[5].Executed || exs[5].Rejections[0].Test != RejectDuplicate {
		t.Errorf("a duplicate id was executed: %+v", exs[5])
	}
	if !exs[0].Executed || !exs[4].Executed {
		t.Fatalf("the good workflows around the bad lines were not executed: %+v %+v", exs[0], exs[4])
	}
}

func exsID(t *testing.T, line string) string {
	w, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return w.ID
}

// TestRunLimits: a file over a limit is refused before anything runs,
// naming the line, the limit and the setting that raises it.
func TestRunLimits(t *testing.T) {
	steps := make([]string, 300)
	instr := make([]string, 300)
	for i := range steps {
		steps[i] = fmt.Sprintf(`"s%d"`, i)
		instr[i] = fmt.Sprintf(`{"step":"s%d","text":"x"}`, i)
	}
	long := `{"id":"w","domain":"office","input":"x","plan":[` + strings.Join(steps, ",") + `],"instructions":[` + strings.Join(instr, ",") + `],"output":{"spec":"x"},"checker":{"expected":"x"}}`
	for _, tc := range []struct {
		name, in string
		lim      Limits
		want     string
	}{
		{"plan steps", "{}\n" + long + "\n", Limits{}, ":2: field plan: 300 steps, more than the limit of 256; raise synth.max_plan_steps in the job file"},
		{"workflows", "{}\n{}\n{}\n", Limits{MaxWorkflows: 2}, ":3: more than 2 workflows, the limit; raise synth.max_workflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wfs := filepath.Join(t.TempDir(), WorkflowsFile)
			if err := os.WriteFile(wfs, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "out")
			_, err := Run(t.Context(), &Executor{}, RunOptions{Workflows: wfs, Dir: dir, Limits: tc.lim})
			var inv *InvalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), wfs+tc.want) {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was created", dir)
			}
		})
	}
}

// TestRunRefusesOtherWorkflows resumes a run directory with another
// workflows file: it is refused, not mixed.
func TestRunRefusesOtherWorkflows(t *testing.T) {
	e := startEmbedded(t)
	a := e.generated(t, 3)
	dir := t.TempDir()
	x := e.executor(t, planAware(t), compress.DefaultPlanK)
	if _, err := Run(t.Context(), x, RunOptions{Workflows: a, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	other := filepath.Join(t.TempDir(), WorkflowsFile)
	for name, content := range map[string]string{
		"reordered": lines[1] + lines[0] + lines[2],
		"shorter":   lines[0],
	} {
		if err := os.WriteFile(other, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(t.Context(), x, RunOptions{Workflows: other, Dir: dir}); !errors.Is(err, ErrForeignDir) {
			t.Errorf("%s: %v, want ErrForeignDir", name, err)
		}
	}
	// Other endpoints did not run these executions.
	y := *x
	y.Models = "other endpoints"
	if _, err := Run(t.Context(), &y, RunOptions{Workflows: a, Dir: dir}); !errors.Is(err, ErrForeignDir) {
		t.Errorf("other endpoints: %v, want ErrForeignDir", err)
	}
	// The same file, grown, resumes.
	if err := os.WriteFile(other, []byte(string(b)+string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Run(t.Context(), x, RunOptions{Workflows: other, Dir: dir}); err != nil || s.Resumed != 3 || s.Read != 6 {
		t.Fatalf("grown file: %+v %v", s, err)
	}
}
