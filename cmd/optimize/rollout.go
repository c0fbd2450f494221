package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/rollout"
)

func rolloutCommand() *cli.Command {
	return &cli.Command{
		Name:  "rollout",
		Usage: "run the agent on a split with one compression strategy",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "job file (YAML)"},
			&cli.StringFlag{Name: "split", Value: "train", Usage: "train or test"},
			&cli.StringFlag{Name: "strategy", Value: "none", Usage: "none, fifo, prompting or guideline"},
			&cli.StringFlag{Name: "guideline", Usage: "history guideline template (strategy guideline)"},
			&cli.StringFlag{Name: "observation-guideline", Usage: "observation guideline template (strategy guideline)"},
			&cli.IntFlag{Name: "limit", Usage: "run only the first N tasks of the split"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (written when complete; resumed when interrupted)"},
		},
		Action: func(c *cli.Context) error {
			job, err := pipeline.LoadJob(c.String("config"))
			if err != nil {
				return badInput(err)
			}
			split := c.String("split")
			if split != "train" && split != "test" {
				return badInput(fmt.Errorf("--split: want train or test, got %q", split))
			}
			strategy, err := rollout.ParseStrategy(c.String("strategy"))
			if err != nil {
				return badInput(fmt.Errorf("--strategy: %w", err))
			}
			hist, obs, err := rolloutGuidelines(job, strategy, c.String("guideline"), c.String("observation-guideline"))
			if err != nil {
				return badInput(err)
			}
			if n := c.Int("limit"); n > 0 {
				if split == "train" {
					job.Env.TrainLimit = n
				} else {
					job.Env.TestLimit = n
				}
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
			agent := rt.NewAgent(rt.Compression(strategy, hist, obs))
			// The job's budget holds for this command too (per invocation:
			// a resumed rollout answers its finished calls from the cache).
			meter, err := pipeline.NewMeter(job.Budget, "")
			if err != nil {
				return err
			}
			agent.Model, agent.Compressor = meter.Wrap(rt.Agent), meter.Wrap(rt.Compressor)
			res, err := rt.Runner(agent, "rollout "+string(strategy)).RunDir(c.Context, tasks, c.String("out"))
			if err != nil {
				if errors.Is(err, pipeline.ErrBudget) {
					return fmt.Errorf("%w; finished tasks are kept in %s.partial: raise the budget and run the same command again to resume", err, c.String("out"))
				}
				return err
			}
			pipeline.PrintTable(c.App.Writer, []pipeline.Row{{Name: string(strategy), Summary: res.Summary}})
			return nil
		},
	}
}

// rolloutGuidelines compiles the guidelines a strategy needs: the built-in
// naive prompts for prompting, the given files for guideline.
func rolloutGuidelines(job *pipeline.Job, s rollout.Strategy, histFile, obsFile string) (hist, obs *rollout.Guideline, err error) {
	switch s {
	case rollout.StrategyPrompting:
		if histFile != "" || obsFile != "" {
			return nil, nil, fmt.Errorf("--guideline goes with --strategy guideline")
		}
	case rollout.StrategyGuideline:
		if histFile == "" && obsFile == "" {
			return nil, nil, fmt.Errorf("--strategy guideline needs --guideline FILE or --observation-guideline FILE")
		}
		job.Compression.History.Guideline = histFile
		job.Compression.History.Enabled = histFile != ""
		job.Compression.Observation.Guideline = obsFile
		job.Compression.Observation.Enabled = obsFile != ""
	default:
		return nil, nil, nil
	}
	if !job.Compression.History.Enabled && !job.Compression.Observation.Enabled {
		return nil, nil, fmt.Errorf("strategy %s compresses nothing: the job enables neither compression.history nor compression.observation", s)
	}
	if hist, err = pipeline.StartingCompiled(job, guideline.KindHistory); err != nil {
		return nil, nil, err
	}
	if obs, err = pipeline.StartingCompiled(job, guideline.KindObservation); err != nil {
		return nil, nil, err
	}
	return hist, obs, nil
}
