package main

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/pipeline"
)

func meterCommand() *cli.Command {
	return &cli.Command{
		Name:  "meter",
		Usage: "a metering proxy: forwards workers' LLM requests and records each in its run's spend ledger",
		Description: "Run it beside the workers and start them with --meter URL. Each request names its endpoint, which must\n" +
			"be one of --upstream (else 403: it is never an open proxy), and its ledger entry, in a run store under\n" +
			"one of --store. The meter forwards the request (Authorization passes through, never logged), reads the\n" +
			"whole answer, records it (one request, and the tokens of a 2xx answer's usage), then relays it. An answer\n" +
			"is recorded even when the worker died meanwhile; a request the endpoint never answered is not. A meter\n" +
			"killed between an answer and its record loses that record. Requests are bounded at 32 MiB, answers at\n" +
			"64 MiB; SIGTERM lets the requests in flight finish.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8790", Usage: "`ADDR` to listen on (port 0 picks a free one)"},
			&cli.StringSliceFlag{Name: "upstream", Usage: "an endpoint's base `URL` requests may go to, exactly as the job's base_url (repeatable)"},
			&cli.StringSliceFlag{Name: "store", Usage: "a run store `URL` prefix whose ledgers the meter writes: file:///dir/ or s3://bucket?prefix=p/&… (repeatable)"},
			&cli.DurationFlag{Name: "timeout", Value: pipeline.DefaultMeterTimeout, Usage: "how long an upstream may take to answer, `D`"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return badInput(fmt.Errorf("unexpected argument %q: optimize meter takes only flags", c.Args().First()))
			}
			p, err := pipeline.NewMeterProxy(pipeline.MeterProxyConfig{Upstreams: c.StringSlice("upstream"), Stores: c.StringSlice("store"), Timeout: c.Duration("timeout")})
			if err != nil {
				return badInput(err)
			}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return badInput(fmt.Errorf("--listen: %w", err))
			}
			slog.Info("meter listening", "url", "http://"+ln.Addr().String(), "upstreams", len(c.StringSlice("upstream")), "stores", len(c.StringSlice("store")))
			err = p.Serve(c.Context, ln)
			slog.Info("meter stopped")
			return err
		},
	}
}
