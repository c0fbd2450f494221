// Command optimize is ctxopt's CLI: it parses flags, builds a context that
// SIGINT/SIGTERM cancel, calls library code and maps errors to exit codes.
// Each command lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/internal/version"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the job ran and failed, or an unexpected error
	exitUsage   = 2 // bad flags or bad input files
	exitBudget  = 3 // stopped cleanly at a budget; re-run to resume
	// exitUnfinished: an endpoint stayed unavailable past the job's
	// patience; finished work is kept and a re-run retries the rest.
	exitUnfinished = 4
	exitCancelled  = 130
)

// usageError marks errors caused by the user's input.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func badInput(err error) error { return usageError{err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Writer:    stdout,
		ErrWriter: stderr,
		Name:      "optimize",
		Usage:     "optimize and distill the context compressor of LLM agents",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
			&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
		},
		Before: func(c *cli.Context) error { return setupLogging(c, stderr) },
		// The app's own action runs for --version, no command, and an
		// unknown one (which cli passes here as an argument).
		Action: func(c *cli.Context) error {
			switch {
			case c.Args().Present():
				return badInput(fmt.Errorf("unknown command %q; see optimize --help", c.Args().First()))
			case c.Bool("version"):
				return printVersion(c)
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			versionCommand(),
			rolloutCommand(),
			runCommand(),
			evalCommand(),
			gateCommand(),
			nightlyCommand(),
			guidelineCommand(),
			distillCommand(),
			importCommand(),
			simCommand(),
			meterCommand(),
			workerCommand(),
			scheduleCommand(),
			serveCommand(),
			cacheCommand(),
			synthCommand(),
			showCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {},
		// Repeatable flags are repeated, never comma-split: candidate specs
		// and file names contain commas.
		DisableSliceFlagSeparator: true,
	}
	// An error before any command's action ran is a usage error: unknown
	// command or flag, missing required flag.
	started := false
	markStarted(app.Commands, &started)
	logVersionAtStart(app.Commands)
	err := app.RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	code := exitUsage
	if started {
		code = exitCode(ctx, err)
	}
	if code == exitCancelled {
		// "context canceled" tells a user nothing; finished work is kept.
		fmt.Fprintln(stderr, "optimize:", interruptedMessage)
		return code
	}
	// Errors quote flags, URLs, files and servers' replies: whatever
	// secret they carry is replaced before the terminal or a CI log sees it.
	fmt.Fprintln(stderr, "optimize:", redact.Scrub(err.Error()))
	return code
}

// interruptedMessage ends a command stopped by SIGINT or SIGTERM.
const interruptedMessage = "interrupted; run the same command again to resume"

func markStarted(cmds []*cli.Command, started *bool) {
	for _, c := range cmds {
		wrapActions(c, func() { *started = true })
	}
}

func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var ce cli.ExitCoder
	switch {
	case errors.As(err, &ce):
		return ce.ExitCode()
	case errors.As(err, &ue):
		return exitUsage
	case errorsIsBudget(err):
		return exitBudget
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitCancelled
	case errors.Is(err, llm.ErrUnavailable):
		return exitUnfinished
	default:
		return exitFailure
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:   "version",
		Usage:  "print the module version, VCS revision and the embedded model's version",
		Action: printVersion,
	}
}

func printVersion(c *cli.Context) error {
	_, err := fmt.Fprint(c.App.Writer, version.Get())
	return err
}

// longCommands are the commands that run for minutes or serve: their log
// starts with the build, so a log read later says which binary wrote it.
var longCommands = map[string]bool{
	"rollout": true, "run": true, "eval": true, "nightly": true, "distill": true,
	"import": true, "sim": true, "serve": true, "synth": true,
}

// logVersionAtStart logs the build once when a long command's action
// starts (not for its --help or a usage error).
func logVersionAtStart(cmds []*cli.Command) {
	for _, c := range cmds {
		if !longCommands[c.Name] {
			continue
		}
		wrapActions(c, func() {
			v := version.Get()
			slog.Info("ctxopt", "version", v.Version, "revision", v.RevisionLabel(),
				"go", v.GoVersion, "embedded_model", v.EmbeddedModel)
		})
	}
}

// wrapActions calls before ahead of c's action and its subcommands'.
func wrapActions(c *cli.Command, before func()) {
	if a := c.Action; a != nil {
		c.Action = func(ctx *cli.Context) error {
			before()
			return a(ctx)
		}
	}
	for _, sc := range c.Subcommands {
		wrapActions(sc, before)
	}
}

// logLevels are the values --log-level accepts.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func setupLogging(c *cli.Context, w io.Writer) error {
	level, ok := logLevels[strings.ToLower(c.String("log-level"))]
	if !ok {
		return badInput(fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level")))
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: scrubAttr}
	var h slog.Handler
	switch c.String("log-format") {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return badInput(fmt.Errorf("--log-format %q: want text or json", c.String("log-format")))
	}
	slog.SetDefault(slog.New(h))
	return nil
}

// scrubAttr replaces the secrets in a log record's message and in its
// string and error values, as the error a command exits with.
func scrubAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; {
	case v.Kind() == slog.KindString:
		a.Value = slog.StringValue(redact.Scrub(v.String()))
	case v.Kind() == slog.KindAny:
		if err, ok := v.Any().(error); ok {
			a.Value = slog.StringValue(redact.Scrub(err.Error()))
		}
	}
	return a
}

// checkOutDir rejects an output directory path that names a file, or lies
// under one, before any work starts.
func checkOutDir(flag, path string) error {
	if path == "" {
		return badInput(fmt.Errorf("--%s is required: give the directory to write", flag))
	}
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return badInput(fmt.Errorf("--%s %s: %s is a file, not a directory; give a directory path (it is created if missing)", flag, path, p))
			}
			return nil
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
