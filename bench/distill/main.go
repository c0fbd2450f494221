// Command distill is the benchmark driver of bench/distill.sh. gen writes a
// run directory whose successful trajectories hold the compression events
// of N rows, for `optimize distill` to export; export writes rows JSONL (an
// export's train.jsonl) with distill.Writer, for the Parquet-only
// comparison with DuckDB.
//
//	distill gen -rows 100000 -bytes 6000 -out RUN
//	distill export -in rows.jsonl -out DIR -formats parquet
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/internal/datagen"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: distill gen|export [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "export":
		err = export(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want gen or export)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distill:", err)
		os.Exit(1)
	}
}

// eventsPerTrajectory is the compression events of a generated trajectory:
// a long task compresses its history every few steps.
const eventsPerTrajectory = 10

// gen writes RUN/stages/bench/rollout/trajectories.jsonl: successful
// trajectories, one task each, whose events are distinct rows of about
// -bytes of text (a sixth of it the teacher's summary).
func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	rows := fs.Int("rows", 100000, "rows to generate")
	size := fs.Int("bytes", 6000, "approximate text bytes per row")
	seed := fs.Uint64("seed", 42, "generator seed")
	out := fs.String("out", "", "run directory to create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("gen: -out is required")
	}
	path := filepath.Join(*out, "stages", "bench", "rollout", rollout.TrajectoriesFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	r := rand.New(rand.NewPCG(*seed, *seed))
	system := "You compress the interaction history of an agent. Keep every identifier, number and fact the remaining steps need; drop everything else."
	in := *size * 5 / 6
	for t := 0; t*eventsPerTrajectory < *rows; t++ {
		tr := rollout.Trajectory{TaskID: fmt.Sprintf("task-%06d", t), Split: "train", Success: true}
		for e := range min(eventsPerTrajectory, *rows-t*eventsPerTrajectory) {
			tr.Events = append(tr.Events, compress.Event{
				Kind:        compress.KindHistory,
				Step:        3 * (e + 1),
				GuidelineID: "g-ut1-co1",
				Input:       []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: datagen.TraceText(r, in-len(system))}},
				Output:      datagen.TraceText(r, *size-in),
				Model:       "gpt-4.1-2025-04-14",
			})
		}
		if err := enc.Encode(&tr); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func export(args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	in := fs.String("in", "", "input JSONL rows (an export's train.jsonl)")
	out := fs.String("out", "", "output dataset directory")
	rowGroup := fs.Int("row-group-rows", 0, "rows per Parquet row group (0: default)")
	formats := fs.String("formats", "", "comma-separated formats to write (empty: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("export: -in and -out are required")
	}
	opts := distill.WriterOptions{RowGroupRows: *rowGroup}
	if *formats != "" {
		opts.Formats = strings.Split(*formats, ",")
	}
	start := time.Now()
	n, err := exportFile(*in, *out, opts)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	fmt.Printf("ours: %d rows in %.2fs: %.0f rows/s, peak RSS %d MB\n",
		n, elapsed.Seconds(), float64(n)/elapsed.Seconds(), ru.Maxrss/1024)
	return nil
}

// exportFile decodes rows with encoding/json and writes them with
// distill.Writer; it returns the rows written.
func exportFile(in, out string, opts distill.WriterOptions) (int, error) {
	f, err := os.Open(in)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w, err := distill.NewWriter(out, opts)
	if err != nil {
		return 0, err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	n := 0
	for {
		var r distill.Row
		if err = dec.Decode(&r); err != nil {
			break
		}
		if err = w.Write(r); err != nil {
			break
		}
		n++
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("%s: row %d: %w", in, n+1, err)
	}
	stats, cerr := w.Close()
	if err = errors.Join(err, cerr); err != nil {
		return n, err
	}
	if stats.Rows() != n {
		return n, fmt.Errorf("read %d rows but the writer wrote %d", n, stats.Rows())
	}
	return n, nil
}
