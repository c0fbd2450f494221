package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "A/B-evaluate compression candidates on the same tasks, with paired statistics and a report",
		Description: "Each --candidate is NAME=STRATEGY[,guideline=FILE|ID][,compressor=URL][,compressor_model=MODEL];\n" +
			"strategies: " + strategyNames() + ". Writes summary.json, comparisons.json,\n" +
			"outcomes.jsonl, report.md, plots/*.svg and report.html into --out; re-running reuses\n" +
			"finished rollouts and cached calls.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML): models, environment, thresholds"},
			&cli.StringSliceFlag{Name: "candidate", Required: true, Usage: "candidate `NAME=SPEC` (repeat; the first is the reference unless --reference)"},
			&cli.StringFlag{Name: "split", Value: "test", Usage: "task split: train or test"},
			&cli.IntFlag{Name: "samples", Value: 1, Usage: "samples per task (seeded; they differ at temperature > 0)"},
			&cli.StringFlag{Name: "reference", Usage: "candidate the others are compared with (default: the first)"},
			&cli.StringFlag{Name: "registry", Usage: "guideline registry `DIR` for guideline=ID"},
			&cli.StringFlag{Name: "run", Usage: "optimize run `DIR`: its registry for guideline=ID, and guideline=" + pipeline.Selected + " for the guideline it selected"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "evaluation directory"},
			&cli.StringFlag{Name: "replay", Usage: "session log `DIR` (serve's session_log.dir, or an optimize import output): replay sampled logged requests for every candidate and score agreement"},
			&cli.IntFlag{Name: "replay-sample", Value: eval.DefaultReplaySample, Usage: "logged requests --replay samples (stratified by session length, seeded by the job's seed)"},
			&cli.BoolFlag{Name: "replace", Usage: "redo a candidate's rollouts that --out holds from another configuration (another guideline, settings or model version) instead of refusing"},
		},
		Action: func(c *cli.Context) error {
			job, err := pipeline.LoadJob(c.String("config"))
			if err != nil {
				return badInput(err)
			}
			specs, err := eval.ParseSpecs(c.StringSlice("candidate"))
			if err != nil {
				return badInput(err)
			}
			opt := pipeline.EvalOptions{
				Specs: specs, Split: c.String("split"), Samples: c.Int("samples"),
				Reference: c.String("reference"), Registry: c.String("registry"), Run: c.String("run"),
				Replace: c.Bool("replace"), Replay: c.String("replay"), ReplaySample: c.Int("replay-sample"),
			}
			res, err := pipeline.Evaluate(c.Context, job, opt, c.String("out"))
			if err != nil {
				if errors.Is(err, pipeline.ErrBudget) {
					return fmt.Errorf("%w; finished rollouts are kept: raise the budget in %s and run the same command again to resume", err, c.String("config"))
				}
				if errors.Is(err, rollout.ErrOtherRollout) {
					err = fmt.Errorf("%w (or pass --replace to redo it)", err)
				}
				return inputOr(err)
			}
			lead, err := pipeline.EvalLead(job, res, opt)
			if err != nil {
				return err
			}
			if err := report.Write(c.String("out"), res, "ctxopt eval: "+job.Name, lead); err != nil {
				return err
			}
			if err := report.Summary(c.App.Writer, res, lead); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %s/{%s,%s,%s,%s}\n", c.String("out"), eval.SummaryFile, eval.ComparisonsFile, report.MarkdownFile, report.HTMLFile)
			return nil
		},
	}
}

// strategyNames lists the compression strategies for help texts.
func strategyNames() string {
	all := compress.Names()
	names := make([]string, len(all))
	for i, n := range all {
		names[i] = string(n)
	}
	return strings.Join(names, ", ")
}
