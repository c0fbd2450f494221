package main

import (
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/llm/embedded"
)

func simCommand() *cli.Command {
	return &cli.Command{
		Name:  "sim",
		Usage: "serve the embedded offline model over HTTP in the OpenAI format",
		Description: "Serves the deterministic offline model of docs/embedded-model.md until interrupted. Point a role's\n" +
			"base_url at the logged URL. The fault flags inject latency, 429s, 5xx, timeouts and malformed tool\n" +
			"calls at the given rates, drawn from a hash of each request and its arrival count.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: embedded.DefaultAddr, Usage: "`ADDR` to listen on (port 0 picks a free one)"},
			&cli.DurationFlag{Name: "latency", Usage: "answer every call after `D`"},
			&cli.Float64Flag{Name: "rate-429", Usage: "share of calls answered 429 with Retry-After"},
			&cli.Float64Flag{Name: "rate-5xx", Usage: "share of calls answered 500 or 503"},
			&cli.Float64Flag{Name: "rate-timeout", Usage: "share of calls held for --hang or until the client goes away"},
			&cli.Float64Flag{Name: "rate-malformed", Usage: "share of agent calls whose tool-call arguments are cut to invalid JSON"},
			&cli.DurationFlag{Name: "retry-after", Value: embedded.DefaultRetryAfter, Usage: "Retry-After of 429 answers"},
			&cli.DurationFlag{Name: "hang", Value: embedded.DefaultHang, Usage: "how long a timeout fault holds a call"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return badInput(fmt.Errorf("unexpected argument %q: optimize sim takes only flags", c.Args().First()))
			}
			cfg := embedded.Config{
				Latency:       c.Duration("latency"),
				Rate429:       c.Float64("rate-429"),
				Rate5xx:       c.Float64("rate-5xx"),
				RateTimeout:   c.Float64("rate-timeout"),
				RateMalformed: c.Float64("rate-malformed"),
				RetryAfter:    c.Duration("retry-after"),
				Hang:          c.Duration("hang"),
			}
			if err := cfg.Validate(); err != nil {
				return badInput(fmt.Errorf("fault flags (rates in [0,1], durations >= 0): %w", err))
			}
			srv, err := embedded.Start(c.Context, c.String("listen"), cfg)
			if err != nil {
				return badInput(fmt.Errorf("--listen: %w", err))
			}
			slog.Info("embedded model serving", "url", srv.URL(), "latency", cfg.Latency,
				"rate_429", cfg.Rate429, "rate_5xx", cfg.Rate5xx, "rate_timeout", cfg.RateTimeout, "rate_malformed", cfg.RateMalformed)
			<-c.Context.Done()
			err = srv.Close()
			st := srv.Stats()
			slog.Info("embedded model stopped", "requests", st.Requests, "by_role", st.ByRole, "bad_requests", st.BadRequests, "faults", st.Faults)
			return err
		},
	}
}
