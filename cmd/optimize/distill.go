package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/redact"
)

func distillCommand() *cli.Command {
	return &cli.Command{
		Name:  "distill",
		Usage: "export the teacher's compressions of a run as LoRA training data (JSONL, Parquet, card, recipes)",
		Description: "Reads every trajectories.jsonl under --run except those of the test split (evaluations), keeps the compression events of trajectories in which\n" +
			"the agent succeeded, and with --synth the compressions of the workflows optimize synth run accepted (kind paace),\n" +
			"redacts secrets, de-duplicates, drops rows over --max-length tokens, splits by task\n" +
			"and writes the dataset into --out, replacing a previous build there only when complete.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "run directory (or rollout output directory) to read"},
			&cli.StringFlag{Name: "out", Usage: "dataset directory to write"},
			&cli.StringFlag{Name: "guideline", Usage: "keep events whose guideline id starts with `ID` (default: summary.json's selected_guideline, else all)"},
			&cli.IntFlag{Name: "seed", Value: distill.DefaultSeed, Usage: "seed of the task split"},
			&cli.Float64Flag{Name: "validation-fraction", Value: distill.DefaultValidationFraction, Usage: "share of tasks in the validation split, in [0, 1); 0 for none"},
			&cli.IntFlag{Name: "max-length", Value: distill.DefaultMaxLength, Usage: "drop rows with more input+output `TOKENS`"},
			&cli.BoolFlag{Name: "redact-emails", Usage: "also redact e-mail addresses"},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip unreadable trajectory lines (counted in manifest.json) instead of failing"},
			&cli.StringFlag{Name: "license", Usage: "the card's license `ID` (default: other, the teacher's terms apply)"},
			&cli.StringFlag{Name: "license-link", Usage: "`URL` of the license text, for the card's license_link"},
			&cli.StringSliceFlag{Name: "trajectories", Usage: "read this trajectories `FILE` instead of searching --run (repeatable)"},
			&cli.StringSliceFlag{Name: "synth", Usage: "also read this optimize synth run output `DIR`: its accepted workflows' compressions become rows of kind paace (repeatable)"},
		},
		Action: distillBuild,
		Subcommands: []*cli.Command{{
			Name:      "validate",
			Usage:     "check JSONL or Parquet files against the dataset formats and the OpenAI chat fine-tuning rules",
			ArgsUsage: "PATH...",
			Action:    distillValidate,
		}},
	}
}

func distillBuild(c *cli.Context) error {
	if c.Args().Present() {
		return badInput(fmt.Errorf("unexpected argument %q (did you mean: optimize distill validate %s?)", c.Args().First(), c.Args().First()))
	}
	run, out := c.String("run"), c.String("out")
	files, synthRuns := c.StringSlice("trajectories"), c.StringSlice("synth")
	switch {
	case out == "":
		return badInput(errors.New("--out is required"))
	case run == "" && len(files) == 0 && len(synthRuns) == 0:
		return badInput(errors.New("--run, --trajectories or --synth is required"))
	}
	if err := checkOutDir("out", out); err != nil {
		return err
	}
	if fi, err := os.Stat(run); run != "" && err == nil && !fi.IsDir() {
		return badInput(fmt.Errorf("--run %s is a file, not a run directory; give the directory, or the file with --trajectories", run))
	}
	fraction := c.Float64("validation-fraction")
	if err := distill.CheckValidationFraction(fraction); err != nil {
		return badInput(fmt.Errorf("--validation-fraction %w", err))
	}
	if c.Int("max-length") <= 0 {
		return badInput(fmt.Errorf("--max-length %d: want a positive token count", c.Int("max-length")))
	}
	m, err := distill.Build(c.Context, run, out, distill.Options{
		Seed:               c.Int("seed"),
		ValidationFraction: &fraction,
		MaxLength:          c.Int("max-length"),
		RedactEmails:       c.Bool("redact-emails"),
		SkipBad:            c.Bool("skip-bad"),
		Guideline:          c.String("guideline"),
		Trajectories:       files,
		Synth:              synthRuns,
		License:            c.String("license"),
		LicenseLink:        c.String("license-link"),
	})
	var lineErr *distill.LineError
	var limitErr *jsonl.LimitError
	var textErr *jsonl.TextError
	if errors.Is(err, distill.ErrNoData) || errors.As(err, &lineErr) || errors.As(err, &limitErr) || errors.As(err, &textErr) || errors.Is(err, fs.ErrNotExist) {
		return badInput(err)
	}
	if err != nil {
		return err
	}
	redacted := 0
	for _, n := range m.Redactions {
		redacted += n
	}
	fmt.Fprintf(c.App.Writer, "distill: %d rows written to %s (train %d, validation %d) from %d events; %d dropped, %d secrets redacted\n",
		m.Rows.Kept, out, m.Splits[distill.SplitTrain].Rows, m.Splits[distill.SplitValidation].Rows,
		m.Rows.Read, m.Rows.Read-m.Rows.Kept, redacted)
	return nil
}

func distillValidate(c *cli.Context) error {
	if !c.Args().Present() {
		return badInput(errors.New("validate: give one or more .jsonl or .parquet files"))
	}
	total, failed := 0, 0
	for _, path := range c.Args().Slice() {
		vs, err := distill.ValidateFile(c.Context, path)
		if err != nil {
			return badInput(err)
		}
		if len(vs) == 0 {
			fmt.Fprintf(c.App.Writer, "%s: ok\n", path)
			continue
		}
		failed++
		total += len(vs)
		for _, v := range vs {
			fmt.Fprintln(c.App.Writer, redact.Scrub(v.String()))
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("validate: %d violation(s) in %d file(s)", total, failed), exitFailure)
	}
	return nil
}
