// Package datagen is what the generators of the bundled datasets
// (datasets/*/gen) share: their flags, the check of the task counts, the
// version string and writing the files.
package datagen

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

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
