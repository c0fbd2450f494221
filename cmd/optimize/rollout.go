package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/report"
)

func rolloutCommand() *cli.Command {
	return &cli.Command{
		Name:  "rollout",
		Usage: "run the agent on a split with one compression strategy",
		// The registry is complete once every package's init has run.
		Description: "Strategies (and what each needs besides the agent):\n" + compress.Help(),
		Flags: append(splitFlags("output directory (written when complete; resumed when interrupted)"),
			&cli.StringFlag{Name: "strategy", Usage: "compression strategy, one of those listed above (default: the job's compression.strategy, else none)"},
			&cli.StringFlag{Name: "guideline", Usage: "history guideline template (strategies that take a given guideline)"},
			&cli.StringFlag{Name: "observation-guideline", Usage: "observation guideline template (strategies that take a given guideline)"},
		),
		Action: func(c *cli.Context) error {
			job, split, err := loadSplitJob(c)
			if err != nil {
				return err
			}
			name := c.String("strategy")
			if name == "" {
				name = job.Compression.Strategy
			}
			if name == "" {
				name = string(compress.None)
			}
			mod, err := compress.Lookup(name)
			if err != nil {
				return badInput(fmt.Errorf("--strategy: %w", err))
			}
			strategy := mod.Name
			hist, obs, err := pipeline.StrategyGuidelines(job, strategy, c.String("guideline"), c.String("observation-guideline"))
			if err != nil {
				return badInput(err)
			}
			rt, err := pipeline.Open(c.Context, job)
			if err != nil {
				return inputOr(err)
			}
			defer rt.Close()
			tasks, err := rt.Tasks(split)
			if err != nil {
				return badInput(err)
			}
			// The job's budget holds for this command too (per invocation:
			// a resumed rollout answers its finished calls from the cache).
			meter, err := pipeline.NewMeter(job.Budget, "")
			if err != nil {
				return err
			}
			s, err := rt.Strategy(strategy, hist, obs, meter.Wrap(rt.Compressor), meter.Wrap(rt.Embedder))
			if err != nil {
				return inputOr(err)
			}
			agent := rt.NewAgent(s)
			agent.Model = meter.Wrap(rt.Agent)
			runner := rt.Runner(agent, "rollout "+string(strategy))
			runner.Staged = func(staging string) error {
				return rt.RecordMalformed(filepath.Join(staging, pipeline.MalformedFile))
			}
			res, err := rt.RolloutWithPatience(c.Context, runner, tasks, c.String("out"))
			if errors.Is(err, pipeline.ErrBudget) {
				return fmt.Errorf("%w; finished tasks are kept in %s.partial: raise the budget and run the same command again to resume", err, c.String("out"))
			}
			if res == nil {
				return inputOr(err)
			}
			// Unfinished tasks still leave a table: success is over all
			// tasks, the unfinished ones in the infra column.
			report.PrintTable(c.App.Writer, []report.Row{{Name: string(strategy), Summary: res.Summary}})
			report.PrintRoleStats(c.App.Writer, rt.RoleStats())
			return err
		},
	}
}

// splitFlags are the flags of commands that roll out on one split: the
// job, the split, a task limit and the output directory (out describes it).
func splitFlags(out string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
		&cli.StringFlag{Name: "split", Value: "train", Usage: "train or test"},
		&cli.IntFlag{Name: "limit", Usage: "run only the first N tasks of the split"},
		&cli.StringFlag{Name: "out", Required: true, Usage: out},
	}
}

// loadSplitJob reads the job of splitFlags, checks the split, the limit
// and the output directory, and applies the limit to the job.
func loadSplitJob(c *cli.Context) (*pipeline.Job, string, error) {
	job, err := pipeline.LoadJob(c.String("config"))
	if err != nil {
		return nil, "", badInput(err)
	}
	split := c.String("split")
	if split != "train" && split != "test" {
		return nil, "", badInput(fmt.Errorf("--split: want train or test, got %q", split))
	}
	n := c.Int("limit")
	if c.IsSet("limit") && n <= 0 {
		return nil, "", badInput(fmt.Errorf("--limit %d: want a positive number of tasks (leave it out to run the whole split)", n))
	}
	if err := checkOutDir("out", c.String("out")); err != nil {
		return nil, "", err
	}
	if n > 0 {
		if split == "train" {
			job.Env.TrainLimit = n
		} else {
			job.Env.TestLimit = n
		}
	}
	return job, split, nil
}
