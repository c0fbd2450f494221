package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/pipeline/temporal"
)

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run the stages and rollouts of jobs with engine: temporal (any number of workers, on any machines that see the runs' stores)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "temporal-address", Value: pipeline.DefaultTemporalAddress, Usage: "Temporal frontend `HOST:PORT`"},
			&cli.StringFlag{Name: "namespace", Value: pipeline.DefaultTemporalNamespace, Usage: "Temporal namespace"},
			&cli.StringFlag{Name: "task-queue", Value: pipeline.DefaultTaskQueue, Usage: "task queue to poll (the job's engine.task_queue)"},
			&cli.IntFlag{Name: "concurrency", Value: 8, Usage: "tasks run at once"},
			&cli.DurationFlag{Name: "drain", Value: time.Minute, Usage: "on SIGTERM, how long running tasks may finish before they are handed back"},
			&cli.StringFlag{Name: "meter", Usage: "send every LLM request through the metering proxy at `URL` (optimize meter), which records it in the run's spend ledger"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return badInput(fmt.Errorf("unexpected argument %q: optimize worker takes only flags", c.Args().First()))
			}
			spec := pipeline.EngineSpec{Kind: pipeline.EngineTemporal, Address: c.String("temporal-address"), Namespace: c.String("namespace"), TaskQueue: c.String("task-queue")}
			if p := spec.Problems(); len(p) > 0 {
				return badInput(fmt.Errorf("--%s: %s", p[0].Field, p[0].Message))
			}
			if n := c.Int("concurrency"); n < 1 || n > 1024 {
				return badInput(fmt.Errorf("--concurrency %d is out of range; want 1 to 1024", n))
			}
			var meter *url.URL
			if m := c.String("meter"); m != "" {
				var err error
				if meter, err = pipeline.ParseMeterURL(m); err != nil {
					return badInput(fmt.Errorf("--meter: %w", err))
				}
			}
			return temporal.RunWorker(c.Context, temporal.WorkerOptions{
				Address: spec.Address, Namespace: spec.Namespace, TaskQueue: spec.TaskQueue,
				Concurrency: c.Int("concurrency"), Drain: c.Duration("drain"), Meter: meter,
			})
		},
	}
}
