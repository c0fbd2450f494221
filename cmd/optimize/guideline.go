package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
	"github.com/ctxopt/ctxopt/pipeline"
)

func guidelineCommand() *cli.Command {
	registryFlags := []cli.Flag{
		&cli.StringFlag{Name: "registry", Usage: "guideline registry `DIR`"},
		&cli.StringFlag{Name: "run", Usage: "run `DIR`; shorthand for --registry DIR/guidelines"},
	}
	return &cli.Command{
		Name:  "guideline",
		Usage: "validate, inspect, compare and promote compression guidelines",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the guidelines of a registry, oldest first",
				Flags: append(append([]cli.Flag{}, registryFlags...),
					&cli.StringFlag{Name: "lineage", Usage: "list only the lineage of `ID`: the guidelines it descends from, from the seed down to it"}),
				Action: guidelineList,
			},
			{
				Name:      "show",
				Usage:     "print a guideline's record and source",
				ArgsUsage: "ID",
				Flags:     registryFlags,
				Action:    guidelineShow,
			},
			{
				Name:      "diff",
				Usage:     "unified diff of two guidelines",
				ArgsUsage: "A B",
				Flags:     registryFlags,
				Action:    guidelineDiff,
			},
			{
				Name:      "merge",
				Usage:     "merge two playbooks learned in parallel (optimizer ace) into a new one: bullets matched by id and by word overlap, counters summed, the result validated and budgeted",
				ArgsUsage: "A B",
				Flags: append(append([]cli.Flag{}, registryFlags...),
					&cli.Float64Flag{Name: "threshold", Value: guideline.DefaultDedupThreshold, Usage: "cosine (word overlap) at or above which two bullets of a section are one"},
					&cli.IntFlag{Name: "max-tokens", Value: pipeline.DefaultACEMaxTokens, Usage: "token budget of the merged playbook's bullets"}),
				Action: guidelineMerge,
			},
			{
				Name:      "validate",
				Usage:     "check guideline files; exit 2 if any is rejected",
				ArgsUsage: "FILE...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "kind", Usage: "history or observation (default: inferred from the variables used)"},
					&cli.BoolFlag{Name: "write-repaired", Usage: "rewrite each file with its Jinja-isms repaired"},
					&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "job `FILE`: warn when its compressor is the embedded model and a guideline carries no directive that model understands"},
				},
				Action: guidelineValidate,
			},
			{
				Name:      "promote",
				Usage:     "make a guideline the production one of its kind (ID, or selected: the one --run DIR selected); with --gate, only if it passes the gate",
				ArgsUsage: "ID|selected",
				Flags:     append(append([]cli.Flag{}, registryFlags...), gateFlags("gate", false)...),
				Action:    guidelinePromote,
			},
		},
	}
}

// openRegistryFlag opens the registry named by --registry or --run. It must
// exist: a mistyped path should not create an empty registry.
func openRegistryFlag(c *cli.Context) (*guideline.Registry, error) {
	dir := c.String("registry")
	switch run := c.String("run"); {
	case dir != "" && run != "":
		return nil, badInput(errors.New("give --registry or --run, not both"))
	case run != "":
		dir = filepath.Join(run, pipeline.GuidelinesDir)
	case dir == "":
		return nil, badInput(errors.New("missing --registry DIR (or --run DIR)"))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, badInput(fmt.Errorf("guideline registry %s: not a directory", dir))
	}
	return guideline.OpenRegistry(dir)
}

// positional returns the positional arguments after applying any flags
// written among or after them ("show ID --registry DIR"): urfave/cli v2
// stops parsing flags at the first argument.
func positional(c *cli.Context) ([]string, error) {
	args := c.Args().Slice()
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		flag := commandFlag(c.Command, name)
		if flag == nil {
			return nil, badInput(fmt.Errorf("%s: unknown flag %s", c.Command.Name, a))
		}
		if _, isBool := flag.(*cli.BoolFlag); isBool && !hasVal {
			val, hasVal = "true", true
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, badInput(fmt.Errorf("%s: flag %s needs a value", c.Command.Name, a))
			}
			i++
			val = args[i]
		}
		if err := c.Set(name, val); err != nil {
			return nil, badInput(fmt.Errorf("%s: %s: %w", c.Command.Name, a, err))
		}
	}
	return pos, nil
}

func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// wantArgs returns exactly n positional arguments.
func wantArgs(c *cli.Context, n int) ([]string, error) {
	pos, err := positional(c)
	if err != nil {
		return nil, err
	}
	if len(pos) != n {
		return nil, badInput(fmt.Errorf("%s: want %s, got %d arguments", c.Command.Name, c.Command.ArgsUsage, len(pos)))
	}
	return pos, nil
}

// registryArgs returns exactly n positional arguments and the registry
// --registry names: the opening of every guideline subcommand.
func registryArgs(c *cli.Context, n int) ([]string, *guideline.Registry, error) {
	args, err := wantArgs(c, n)
	if err != nil {
		return nil, nil, err
	}
	reg, err := openRegistryFlag(c)
	return args, reg, err
}

// lookupError marks a missing or ambiguous id, or promoting a rejected
// guideline, as bad input.
func lookupError(err error) error {
	if errors.Is(err, guideline.ErrNotFound) || errors.Is(err, guideline.ErrAmbiguous) || errors.Is(err, guideline.ErrRejected) {
		return badInput(err)
	}
	return err
}

func guidelineList(c *cli.Context) error {
	_, reg, err := registryArgs(c, 0)
	if err != nil {
		return err
	}
	recs, err := reg.List()
	if id := c.String("lineage"); id != "" {
		recs, err = reg.Lineage(id)
	}
	if err != nil {
		return lookupError(err)
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tSTEP\tROUND\tPARENT\tVALID\tPROMOTED\tSCORES\tCREATED\tSOURCE")
	for _, r := range recs {
		valid := "ok"
		if !r.Validation.OK {
			valid = "rejected"
		}
		promoted := ""
		if r.Promoted {
			promoted = "*"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.Step, r.Round, dash(r.Parent),
			valid, promoted, formatScores(r.Scores), r.Created.Format(time.RFC3339), dash(r.Source))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatScores(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.4g", k, m[k])
	}
	return strings.Join(parts, ",")
}

func guidelineShow(c *cli.Context) error {
	args, reg, err := registryArgs(c, 1)
	if err != nil {
		return err
	}
	r, src, err := reg.Get(args[0])
	if err != nil {
		return lookupError(err)
	}
	out := c.App.Writer
	fmt.Fprintf(out, "id:        %s\nkind:      %s\nstep:      %s (round %d)\nparent:    %s\nsource:    %s\ncreated:   %s\npromoted:  %t\nscores:    %s\n",
		r.ID, r.Kind, r.Step, r.Round, dash(r.Parent), dash(r.Source), r.Created.Format(time.RFC3339), r.Promoted, formatScores(r.Scores))
	if len(r.FeedbackIDs) > 0 {
		fmt.Fprintf(out, "feedback:  %s\n", strings.Join(r.FeedbackIDs, ", "))
	}
	fmt.Fprintf(out, "valid:     %t\n", r.Validation.OK)
	for _, rp := range r.Validation.Repairs {
		fmt.Fprintf(out, "  repaired line %d: %s -> %s (%s)\n", rp.Line, rp.From, rp.To, rp.Reason)
	}
	for _, p := range r.Validation.Problems {
		fmt.Fprintf(out, "  problem: %s\n", p)
	}
	fmt.Fprintf(out, "---\n%s", src)
	if !strings.HasSuffix(src, "\n") {
		fmt.Fprintln(out)
	}
	_, pb, err := reg.Playbook(r.ID)
	if errors.Is(err, guideline.ErrNotPlaybook) {
		return nil
	}
	if err != nil {
		return err
	}
	tok, err := llm.NewTokenizer(llm.DefaultEncoding)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "--- playbook: %d bullets, %d tokens\n", len(pb.Bullets), pb.Tokens(tok.Count))
	return guideline.WriteBullets(out, pb)
}

func guidelineDiff(c *cli.Context) error {
	args, reg, err := registryArgs(c, 2)
	if err != nil {
		return err
	}
	d, err := reg.Diff(args[0], args[1])
	if err != nil {
		return lookupError(err)
	}
	fmt.Fprint(c.App.Writer, d)
	_, pa, errA := reg.Playbook(args[0])
	_, pb, errB := reg.Playbook(args[1])
	if errA == nil && errB == nil {
		fmt.Fprintf(c.App.Writer, "--- bullets\n%s", guideline.DiffBullets(pa, pb))
	}
	return nil
}

func guidelineMerge(c *cli.Context) error {
	args, reg, err := registryArgs(c, 2)
	if err != nil {
		return err
	}
	tok, err := llm.NewTokenizer(llm.DefaultEncoding)
	if err != nil {
		return err
	}
	rec, pb, rep, err := reg.MergeStored(args[0], args[1], guideline.MergeOptions{
		Vectors: guideline.LexicalVectors, Threshold: c.Float64("threshold"), MaxTokens: c.Int("max-tokens"), Count: tok.Count,
	})
	if errors.Is(err, guideline.ErrNotPlaybook) {
		return badInput(err)
	}
	if err != nil {
		return lookupError(err)
	}
	out := c.App.Writer
	fmt.Fprintf(out, "merged %s and %s into %s: %d bullets, %d tokens (budget %d)\n", args[0], args[1], rec.ID, len(pb.Bullets), pb.Tokens(tok.Count), c.Int("max-tokens"))
	fmt.Fprintf(out, "  matched by id: %d, renumbered: %d, merged as duplicates: %d, evicted: %d\n", len(rep.Matched), len(rep.Renumbered), len(rep.Deduped), len(rep.Evicted))
	for _, e := range rep.Evicted {
		fmt.Fprintf(out, "  evicted %s (harmful-helpful %d, changed round %d)\n", e.Bullet, e.Net, e.Changed)
	}
	return nil
}

func guidelineValidate(c *cli.Context) error {
	files, err := positional(c)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return badInput(errors.New("validate: want one or more FILE arguments"))
	}
	var kind guideline.Kind
	if k := c.String("kind"); k != "" {
		if kind, err = guideline.ParseKind(k); err != nil {
			return badInput(fmt.Errorf("--kind: %w", err))
		}
	}
	onEmbedded := false
	if cfg := c.String("config"); cfg != "" {
		job, err := pipeline.LoadJob(cfg)
		if err != nil {
			return badInput(err)
		}
		onEmbedded = job.Roles.Compressor.BaseURL == pipeline.Embedded
	}
	var rejected []string
	for _, file := range files {
		b, err := guideline.ReadSource(file)
		if err != nil {
			return badInput(err)
		}
		k := kind
		if k == "" {
			if k, err = guideline.InferKind(string(b)); err != nil {
				return badInput(fmt.Errorf("%s: %w", file, err))
			}
		}
		_, rep := guideline.Validate(k, string(b))
		fmt.Fprintf(c.App.Writer, "%s: %s", file, rep)
		if len(rep.Sections) > 0 {
			fmt.Fprintf(c.App.Writer, "%s: a valid summary writes one of its sections: %s\n", file, strings.Join(rep.Sections, ", "))
		}
		if !rep.OK {
			rejected = append(rejected, file)
		}
		if onEmbedded {
			if u := embedded.Understood(string(b)); len(u) == 0 {
				fmt.Fprintf(c.App.ErrWriter, "%s: warning: the job's compressor is the embedded model, which understands no directive of this guideline and compresses with its defaults (see docs/embedded-model.md, Fact directives)\n", file)
			} else {
				fmt.Fprintf(c.App.Writer, "%s: the embedded model reads: %s\n", file, strings.Join(u, "; "))
			}
		}
		if c.Bool("write-repaired") && rep.Repaired != string(b) {
			if err := atomicfile.WriteFile(file, []byte(rep.Repaired), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s: wrote repaired source\n", file)
		}
	}
	if len(rejected) > 0 {
		return badInput(fmt.Errorf("rejected %d of %d guidelines: %s", len(rejected), len(files), strings.Join(rejected, ", ")))
	}
	return nil
}

// selectedOfRun resolves the ID "selected" to the guideline the run of
// --run selected.
func selectedOfRun(c *cli.Context) (string, error) {
	run := c.String("run")
	if run == "" {
		return "", badInput(fmt.Errorf("%q names the guideline a run selected: give --run DIR", pipeline.Selected))
	}
	id, err := pipeline.SelectedGuideline(run)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", badInput(fmt.Errorf("--run %s has selected no guideline yet (it finished no round)", run))
	}
	return id, nil
}

func guidelinePromote(c *cli.Context) error {
	args, reg, err := registryArgs(c, 1)
	if err != nil {
		return err
	}
	if args[0] == pipeline.Selected {
		if args[0], err = selectedOfRun(c); err != nil {
			return err
		}
	}
	if dir := c.String("gate"); dir != "" {
		rec, _, err := reg.Get(args[0])
		if err != nil {
			return lookupError(err)
		}
		if c.String("against") == "" || len(c.StringSlice("rule")) == 0 {
			return badInput(fmt.Errorf("promote --gate %s needs --against NAME and at least one --rule", dir))
		}
		cand, err := gateCandidate(dir, rec.ID)
		if err != nil {
			return err
		}
		if err := runGate(c, dir, cand); err != nil {
			return err
		}
	} else if c.String("against") != "" || len(c.StringSlice("rule")) > 0 {
		return badInput(errors.New("--against and --rule apply with --gate DIR"))
	}
	r, err := reg.Promote(args[0])
	if err != nil {
		return lookupError(err)
	}
	fmt.Fprintf(c.App.Writer, "promoted %s (%s); wrote %s\n", r.ID, r.Kind, filepath.Join(reg.Dir(), guideline.PromotedFile(r.Kind)))
	return nil
}
