package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/ingest"
	"github.com/ctxopt/ctxopt/report"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "turn existing agent logs into trajectory records that run and distill read",
		Description: "Reads --in (JSONL) in --format openai-chat (chat completion requests and responses), ctxopt (ctxopt's\n" +
			"session logs and trajectory records) or mapping (any JSONL, with a --mapping file of gjson paths), groups\n" +
			"the calls into sessions, redacts secrets and writes a rollout directory into --out, only when complete.\n" +
			"Outcome labels come from the log or from --labels. Invalid UTF-8 is refused (exit 2, line and byte offset)\n" +
			"unless --lossy-utf8. Limits (exit 2 beyond them, naming the line): --max-session-calls calls per session (a longer\n" +
			"session is refused, not split), --max-messages messages per call, --max-depth JSON nesting per line; the log is\n" +
			"read as a stream, so memory is bounded by the limits, not the log. See docs/import.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: ingest.FormatOpenAIChat, Usage: "openai-chat, ctxopt or mapping"},
			&cli.StringFlag{Name: "in", Required: true, Usage: "log `FILE` (JSONL)"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "directory to write (a rollout directory)"},
			&cli.StringFlag{Name: "mapping", Usage: "mapping `FILE` (YAML) for --format mapping"},
			&cli.StringFlag{Name: "labels", Usage: "JSONL `FILE` of {\"session\": ID, \"success\": true|false} overriding the log's labels"},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip unreadable lines (counted) instead of failing"},
			&cli.BoolFlag{Name: "redact-emails", Usage: "also redact e-mail addresses"},
			&cli.BoolFlag{Name: "lossy-utf8", Usage: "replace invalid UTF-8 with U+FFFD (counted and reported) instead of refusing the log"},
			&cli.IntFlag{Name: "max-session-calls", Value: ingest.DefaultMaxSessionCalls, Usage: "limit of calls in one session; a longer session is refused (exit 2), not split"},
			&cli.IntFlag{Name: "max-messages", Value: ingest.DefaultMaxMessages, Usage: "limit of messages in one call"},
			&cli.IntFlag{Name: "max-depth", Value: ingest.DefaultMaxDepth, Usage: "limit of JSON nesting (arrays and objects) in one log line"},
		},
		Action: func(c *cli.Context) error {
			rep, err := ingest.Import(c.Context, ingest.Options{
				Format: c.String("format"), In: c.String("in"), Out: c.String("out"),
				Mapping: c.String("mapping"), Labels: c.String("labels"),
				SkipBad: c.Bool("skip-bad"), RedactEmails: c.Bool("redact-emails"), LossyUTF8: c.Bool("lossy-utf8"),
				MaxSessionCalls: c.Int("max-session-calls"), MaxMessages: c.Int("max-messages"), MaxDepth: c.Int("max-depth"),
			})
			if err != nil {
				if errors.Is(err, ingest.ErrInvalidInput) {
					return badInput(err)
				}
				return err
			}
			red, _ := json.Marshal(rep.Redactions)
			fmt.Fprintf(c.App.Writer, "imported %d sessions (%d labeled) from %d calls in %d lines; %d bad lines skipped; redacted %s\n",
				rep.Sessions, rep.Labeled, rep.Calls, rep.Lines, rep.BadLines, red)
			if c.Bool("lossy-utf8") {
				fmt.Fprintf(c.App.Writer, "replaced %d invalid UTF-8 bytes with U+FFFD (--lossy-utf8)\n", rep.Replaced)
			}
			report.PrintTable(c.App.Writer, []report.Row{{Name: ingest.Strategy, Summary: rep.Summary}})
			return nil
		},
	}
}
