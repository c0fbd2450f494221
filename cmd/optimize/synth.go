package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/synth"
)

func synthCommand() *cli.Command {
	return &cli.Command{
		Name:  "synth",
		Usage: "PAACE-Syn: synthetic plan-structured workflows for plan-aware compression data",
		Subcommands: []*cli.Command{{
			Name:  "generate",
			Usage: "have the generator role write workflows into --out (workflows.jsonl, rejected.jsonl, summary.json)",
			Description: "Each workflow's domain, plan length and noise level are drawn from the job's seed and synth section.\n" +
				"Replies that fail the workflow schema are repaired once by the generator or rejected with the reason;\n" +
				"duplicates (same plan and input up to white space) are dropped. Running the same command again\n" +
				"continues where a previous run stopped; a larger --count extends the set.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (resumed when it holds a previous run)"},
				&cli.IntFlag{Name: "count", Required: true, Usage: "number of workflows to ask for"},
			},
			Action: synthGenerate,
		}, {
			Name:  "run",
			Usage: "execute each workflow twice (full memory, plan-aware teacher compression) and apply the acceptance filter",
			Description: "Writes executions.jsonl (both final outputs, every compression event, the filter's decision and\n" +
				"the failed tests), run.json and run-summary.json into --out. The teacher compresses the history at\n" +
				"every step, conditioned on the next compression.plan_aware.k plan steps. Running the same command\n" +
				"again continues where a previous run stopped and reuses the workflows it finished. A workflows file\n" +
				"with a plan longer than synth.max_plan_steps (default 256) or more workflows than synth.max_workflows\n" +
				"(default 1,000,000) is refused (exit 2) before anything runs. A line that is not a valid workflow, or\n" +
				"repeats the id of an earlier one (the first is executed), is not executed: each is a warning naming its\n" +
				"file and line, and the summary counts them.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
				&cli.StringFlag{Name: "workflows", Required: true, Usage: "optimize synth generate's output directory, or a workflows.jsonl"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (resumed when it holds a previous run)"},
				&cli.StringFlag{Name: "teacher", Usage: "teacher prompt (a history guideline file); default: the built-in plan-aware prompt"},
				&cli.IntFlag{Name: "limit", Usage: "execute only the first N workflows (0: all)"},
			},
			Action: synthRun,
		}, {
			Name:  "evolve",
			Usage: "evolve the teacher prompt: a population scored on a sample of workflows, mutated and crossed by the optimizer role",
			Description: "A population of synth.evolve.population teacher prompts (from --teacher, default the built-in plan-aware\n" +
				"prompt) is scored on synth.evolve.sample workflows by a composite of success rate (share accepted), semantic\n" +
				"fidelity and compression strength (synth.evolve.weights) over synth.evolve.generations generations; the best\n" +
				"synth.evolve.elite survive and the optimizer writes the rest from the rejections and their reasons. Every prompt\n" +
				"goes into --out/registry with its parents and scores; evolution.json holds the lineage and scores by generation.\n" +
				"The best prompt (best.tmpl) is then the teacher of a run over every workflow into --out/run, the export\n" +
				"optimize distill --synth reads. A re-run reuses every prompt's finished runs and the children the optimizer\n" +
				"wrote (children.jsonl).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
				&cli.StringFlag{Name: "workflows", Required: true, Usage: "optimize synth generate's output directory, or a workflows.jsonl"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (resumed when it holds a previous evolution)"},
				&cli.StringFlag{Name: "teacher", Usage: "starting teacher prompt (a history guideline file); default: the built-in plan-aware prompt"},
			},
			Action: synthEvolve,
		}},
	}
}

func synthEvolve(c *cli.Context) error {
	src, origin, err := pipeline.SynthTeacherSource(c.String("teacher"))
	if err != nil {
		return inputOr(err)
	}
	se, err := openSynth(c)
	if err != nil {
		return err
	}
	defer se.rt.Close()
	job, rt, meter, wfs, out := se.job, se.rt, se.meter, se.wfs, c.String("out")
	reg, err := guideline.OpenRegistry(filepath.Join(out, synth.RegistryDir))
	if err != nil {
		return err
	}
	ev := &synth.Evolver{
		Settings: job.Synth.Evolve, Seed: job.Seed, Registry: reg, Concurrency: job.Rollout.Concurrency,
		Optimizer: meter.Wrap(rt.Optimizer), OptimizerModels: rt.Models(llm.RoleOptimizer), Embedded: rt.SynthEmbedded(),
		Executor: func(p *compress.Prompt) (*synth.Executor, error) { return rt.SynthExecutor(p, meter) },
		Limits:   job.Synth.Limits,
	}
	sum, err := ev.Evolve(c.Context, src, origin, wfs, out)
	if err != nil {
		return synthError(err, out)
	}
	synth.PrintEvolveSummary(c.App.Writer, sum)
	best, err := pipeline.SynthTeacher(filepath.Join(out, synth.BestFile))
	if err != nil {
		return err
	}
	x, err := rt.SynthExecutor(best, meter)
	if err != nil {
		return inputOr(err)
	}
	rs, err := synth.Run(c.Context, x, synth.RunOptions{Workflows: wfs, Dir: filepath.Join(out, "run"), Concurrency: job.Rollout.Concurrency, Limits: job.Synth.Limits})
	if err != nil {
		return synthError(err, out)
	}
	fmt.Fprintf(c.App.Writer, "export with the best teacher (%s):\n", filepath.Join(out, "run"))
	synth.PrintRunSummary(c.App.Writer, rs)
	report.PrintRoleStats(c.App.Writer, rt.RoleStats())
	return nil
}

// synthError maps run and evolve errors to exit codes.
func synthError(err error, out string) error {
	var inv *synth.InvalidError
	var limit *jsonl.LimitError
	var text *jsonl.TextError
	switch {
	case errors.As(err, &inv) || errors.Is(err, synth.ErrForeignDir) || errors.Is(err, synth.ErrInvalidTeacher) || errors.As(err, &limit) || errors.As(err, &text):
		return badInput(err)
	case errors.Is(err, pipeline.ErrBudget):
		return fmt.Errorf("%w; the work so far is kept in %s: raise the budget and run the same command again to resume", err, out)
	}
	return err
}

func synthRun(c *cli.Context) error {
	if n := c.Int("limit"); n < 0 {
		return badInput(fmt.Errorf("--limit %d: want 0 (all) or a positive count", n))
	}
	teacher, err := pipeline.SynthTeacher(c.String("teacher"))
	if err != nil {
		return inputOr(err)
	}
	se, err := openSynth(c)
	if err != nil {
		return err
	}
	defer se.rt.Close()
	job, rt, meter, wfs := se.job, se.rt, se.meter, se.wfs
	x, err := rt.SynthExecutor(teacher, meter)
	if err != nil {
		return inputOr(err)
	}
	sum, err := synth.Run(c.Context, x, synth.RunOptions{Workflows: wfs, Dir: c.String("out"), Concurrency: job.Rollout.Concurrency, Limit: c.Int("limit"), Limits: job.Synth.Limits})
	if err != nil {
		return synthError(err, c.String("out"))
	}
	synth.PrintRunSummary(c.App.Writer, sum)
	report.PrintRoleStats(c.App.Writer, rt.RoleStats())
	return nil
}

// synthSetup is what optimize synth run and evolve work with.
type synthSetup struct {
	job   *pipeline.Job
	wfs   string
	rt    *pipeline.Runtime
	meter *pipeline.Meter
}

// openSynth loads the job, checks --workflows and --out, and opens the
// runtime (the caller closes it) and the budget meter.
func openSynth(c *cli.Context) (*synthSetup, error) {
	job, err := pipeline.LoadJob(c.String("config"))
	if err != nil {
		return nil, badInput(err)
	}
	wfs, err := workflowsFile(c.String("workflows"))
	if err != nil {
		return nil, badInput(err)
	}
	if err := checkOutDir("out", c.String("out")); err != nil {
		return nil, err
	}
	rt, err := pipeline.Open(c.Context, job)
	if err != nil {
		return nil, inputOr(err)
	}
	meter, err := pipeline.NewMeter(job.Budget, "")
	if err != nil {
		rt.Close()
		return nil, err
	}
	return &synthSetup{job: job, wfs: wfs, rt: rt, meter: meter}, nil
}

// workflowsFile is path's workflows.jsonl when path is a directory.
func workflowsFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--workflows: %w", err)
	}
	if fi.IsDir() {
		path = filepath.Join(path, synth.WorkflowsFile)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("--workflows: %w (give optimize synth generate's output directory)", err)
		}
	}
	return path, nil
}

func synthGenerate(c *cli.Context) error {
	job, err := pipeline.LoadJob(c.String("config"))
	if err != nil {
		return badInput(err)
	}
	if n := c.Int("count"); n < 1 {
		return badInput(fmt.Errorf("--count %d: want a positive number of workflows", n))
	}
	if err := checkOutDir("out", c.String("out")); err != nil {
		return err
	}
	rt, err := pipeline.Open(c.Context, job)
	if err != nil {
		return inputOr(err)
	}
	defer rt.Close()
	meter, err := pipeline.NewMeter(job.Budget, "")
	if err != nil {
		return err
	}
	cfg := synth.GenerateConfig{Count: c.Int("count"), Seed: job.Seed, Settings: job.Synth, Models: rt.Models(llm.RoleGenerator), Concurrency: job.Rollout.Concurrency}
	sum, err := synth.Generate(c.Context, meter.Wrap(rt.Generator), cfg, c.String("out"))
	if err != nil {
		var inv *synth.InvalidError
		if errors.As(err, &inv) || errors.Is(err, synth.ErrForeignDir) {
			return badInput(err)
		}
		if errors.Is(err, pipeline.ErrBudget) {
			return fmt.Errorf("%w; the workflows so far are kept in %s: raise the budget and run the same command again to resume", err, c.String("out"))
		}
		return err
	}
	fmt.Fprintf(c.App.Writer, "workflows: %d generated (%d after a repair), %d rejected %v, by domain %v\n",
		sum.Generated, sum.ThisRun.Repaired, sumValues(sum.Rejected), sum.Rejected, sum.ByDomain)
	report.PrintRoleStats(c.App.Writer, rt.RoleStats())
	return nil
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
