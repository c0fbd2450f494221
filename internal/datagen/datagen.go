// Package datagen is what the generators of the bundled datasets
// (datasets/*/gen) share: their flags, the check of the task counts, the
// version string and writing the files.
package datagen

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// Config is what every generator takes. The output depends only on it: the
// same seed gives byte-identical files.
type Config struct {
	Seed        uint64
	Out         string
	Train, Test int
}

// Flags registers -seed, -out (out is its default), -train and -test.
func (c *Config) Flags(fs *flag.FlagSet, out string) {
	fs.Uint64Var(&c.Seed, "seed", 42, "random seed")
	fs.StringVar(&c.Out, "out", out, "output directory")
	fs.IntVar(&c.Train, "train", 100, "number of train tasks")
	fs.IntVar(&c.Test, "test", 100, "number of test tasks")
}

// Check rejects task counts that make no dataset.
func (c Config) Check() error {
	if c.Train < 1 || c.Test < 1 {
		return fmt.Errorf("-train and -test must be positive, got %d and %d", c.Train, c.Test)
	}
	return nil
}

// Version is a dataset's version: the generator's format version with the
// seed and counts as build metadata.
func (c Config) Version(format string) string {
	return fmt.Sprintf("%s+seed%d.train%d.test%d", format, c.Seed, c.Train, c.Test)
}

// Main writes what generate returns into out, and returns the exit code of
// the generator's command: 1, with the error on stderr, when it fails.
func Main(out string, generate func() (map[string][]byte, error)) int {
	files, err := generate()
	if err == nil {
		err = Write(out, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		return 1
	}
	return 0
}

// Write creates dir and writes files (name → content) into it, each
// atomically.
func Write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	for name, data := range files {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// vocabulary of agent traces, so the text compresses like real histories
// rather than like random bytes.
var vocabulary = strings.Fields(`the agent called api returned status 200 ok error retry file report.csv
	total revenue quarter north south east west user account balance transfer id order item price
	quantity shipped pending delivered customer note todo completed task summary history observation
	step action tool search result page next previous json key value name date amount spotify song
	playlist venmo payment request gmail inbox thread subject attachment todoist project due label
	filesystem directory path read write 0 1 2 3 4 5 6 7 8 9 10 42 2024 2025 {"id": "name": [ ] }`)

// TraceText returns about n bytes of agent-trace words, in sentences and
// lines: the text of the distillation benchmark's rows (bench/distill) and
// of the redactor's benchmark.
func TraceText(r *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(vocabulary[r.IntN(len(vocabulary))])
		switch r.IntN(14) {
		case 0:
			b.WriteString(".\n")
		case 1:
			b.WriteString(", ")
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}
