package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/rollout"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "optimize the compression guideline of a job (ACON Algorithm 1) and export its dataset",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "run directory (re-running resumes it)"},
			&cli.BoolFlag{Name: "no-reuse", Usage: "run every stage instead of taking those an earlier run finished with the same inputs from the stage store beside the cache"},
			&cli.BoolFlag{Name: "replace", Usage: "when --out holds a run of another job, remove it and start over instead of refusing"},
			&cli.StringFlag{Name: "engine", Usage: "where the rollouts run: inprocess or temporal (overrides the job's engine.kind)"},
			&cli.StringFlag{Name: "temporal-address", Usage: "Temporal frontend `HOST:PORT` (overrides the job's engine.address)"},
		},
		Action: func(c *cli.Context) error {
			job, err := pipeline.LoadJob(c.String("config"))
			if err != nil {
				return badInput(err)
			}
			if err := job.OverrideEngine(c.String("engine"), c.String("temporal-address")); err != nil {
				return badInput(err)
			}
			if err := checkOutDir("out", c.String("out")); err != nil {
				return err
			}
			sum, err := pipeline.Run(c.Context, job, c.String("out"), pipeline.RunOptions{NoReuse: c.Bool("no-reuse"), Replace: c.Bool("replace")})
			if err != nil {
				if errors.Is(err, pipeline.ErrBudget) {
					return fmt.Errorf("%w; finished work is kept: raise the budget in %s and run the same command again to resume", err, c.String("config"))
				}
				return inputOr(err)
			}
			return pipeline.Report(c.App.Writer, c.String("out"), sum, job.Eval.Rules())
		},
	}
}

func errorsIsBudget(err error) bool { return errors.Is(err, pipeline.ErrBudget) }

// inputOr marks err as bad input when the pipeline says the user's input
// caused it, when --out holds other work, or when a trajectories file there
// is damaged or has a line or size over its limit.
func inputOr(err error) error {
	var damaged *rollout.DamagedError
	var limit *jsonl.LimitError
	var text *jsonl.TextError
	if errors.Is(err, pipeline.ErrInvalidInput) || errors.Is(err, rollout.ErrOtherRollout) || errors.As(err, &damaged) || errors.As(err, &limit) || errors.As(err, &text) {
		return badInput(err)
	}
	return err
}
