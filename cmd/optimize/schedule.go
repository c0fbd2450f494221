package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/pipeline/temporal"
)

func scheduleCommand() *cli.Command {
	conn := []cli.Flag{
		&cli.StringFlag{Name: "temporal-address", Value: pipeline.DefaultTemporalAddress, Usage: "Temporal frontend `HOST:PORT`"},
		&cli.StringFlag{Name: "namespace", Value: pipeline.DefaultTemporalNamespace, Usage: "Temporal namespace"},
	}
	return &cli.Command{
		Name:  "schedule",
		Usage: "Temporal schedules that start optimize nightly on a worker (create, list, delete)",
		Subcommands: []*cli.Command{
			{
				Name:  "create",
				Usage: "start optimize nightly --config FILE on a cron; a night still running when the next is due skips it",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "id", Required: true, Usage: "schedule id"},
					&cli.StringFlag{Name: "cron", Required: true, Usage: "cron `EXPR` (UTC), e.g. \"0 2 * * *\""},
					&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "nightly.yaml, at a path the workers see"},
					&cli.StringFlag{Name: "task-queue", Value: pipeline.DefaultTaskQueue, Usage: "task queue the workers poll"},
				}, conn...),
				Action: func(c *cli.Context) error {
					cfg, err := filepath.Abs(c.String("config"))
					if err != nil {
						return badInput(fmt.Errorf("--config: %w", err))
					}
					tc, err := temporal.Dial(c.Context, c.String("temporal-address"), c.String("namespace"))
					if err != nil {
						return err
					}
					defer tc.Close()
					s := temporal.Schedule{ID: c.String("id"), Cron: c.String("cron"), TaskQueue: c.String("task-queue"), Args: []string{"--config", cfg}}
					if err := temporal.CreateSchedule(c.Context, tc, s); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "schedule %s: optimize nightly --config %s at %q (overlap: skip)\n", s.ID, cfg, s.Cron)
					return nil
				},
			},
			{
				Name:  "list",
				Usage: "list the schedules of the namespace",
				Flags: conn,
				Action: func(c *cli.Context) error {
					tc, err := temporal.Dial(c.Context, c.String("temporal-address"), c.String("namespace"))
					if err != nil {
						return err
					}
					defer tc.Close()
					ss, err := temporal.ListSchedules(c.Context, tc)
					if err != nil {
						return err
					}
					for _, s := range ss {
						next := "-"
						if !s.Next.IsZero() {
							next = s.Next.UTC().Format(time.RFC3339)
						}
						fmt.Fprintf(c.App.Writer, "%s\t%s\tnext %s\n", s.ID, s.Cron, next)
					}
					return nil
				},
			},
			{
				Name:      "delete",
				Usage:     "delete a schedule",
				ArgsUsage: "ID",
				Flags:     conn,
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return badInput(fmt.Errorf("optimize schedule delete takes one schedule id, got %d arguments", c.NArg()))
					}
					tc, err := temporal.Dial(c.Context, c.String("temporal-address"), c.String("namespace"))
					if err != nil {
						return err
					}
					defer tc.Close()
					return temporal.DeleteSchedule(c.Context, tc, c.Args().First())
				},
			},
		},
	}
}
