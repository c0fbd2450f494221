package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/pipeline"
)

func nightlyCommand() *cli.Command {
	return &cli.Command{
		Name:  "nightly",
		Usage: "one night of the loop: new session logs → import → optimize → evaluate (tasks and replay) → gate → promote",
		Description: "Idempotent and resumable; run it from cron (README, The nightly loop). Exit 0: promoted, or no new\n" +
			"sessions (nothing done); 1: the gate failed and nothing was promoted; 2: bad config; 3: budget; 4: an\n" +
			"endpoint stayed unavailable (run it again to resume).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "nightly.yaml (see jobs/nightly.example.yaml)"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := pipeline.LoadNightlyConfig(c.String("config"))
			if err != nil {
				return badInput(err)
			}
			res, err := pipeline.Nightly(c.Context, cfg)
			if err != nil {
				return inputOr(err)
			}
			w := c.App.Writer
			if res.Resumed {
				fmt.Fprintf(w, "nightly %s: resumed the night an earlier run began\n", res.Night)
			}
			switch res.Status {
			case pipeline.NightNothingNew:
				fmt.Fprintln(w, "nightly: no new sessions since the last night; nothing done")
				return nil
			case pipeline.NightPromoted:
				fmt.Fprintf(w, "nightly %s: promoted %s (was %s); report %s\n", res.Night, res.Decision.Candidate, res.Decision.Incumbent, res.Report)
				return nil
			}
			return cli.Exit(fmt.Sprintf("nightly %s: nothing promoted: %s; report %s", res.Night, res.Decision.Reason, res.Report), exitFailure)
		},
	}
}
