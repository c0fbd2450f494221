// Command distill is the benchmark driver of bench/distill.sh: it generates
// distillation rows as JSONL and exports them with distill.Writer, printing
// rows/s and peak RSS.
//
//	distill gen -rows 100000 -bytes 6000 -out rows.jsonl
//	distill export -in rows.jsonl -out DIR
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/sourcegraph/conc/stream"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/distill"
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
		err = export(context.Background(), os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want gen or export)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distill:", err)
		os.Exit(1)
	}
}

// vocabulary of agent traces, so the text compresses like real histories
// rather than like random bytes.
var vocabulary = strings.Fields(`the agent called api returned status 200 ok error retry file report.csv
	total revenue quarter north south east west user account balance transfer id order item price
	quantity shipped pending delivered customer note todo completed task summary history observation
	step action tool search result page next previous json key value name date amount spotify song
	playlist venmo payment request gmail inbox thread subject attachment todoist project due label
	filesystem directory path read write 0 1 2 3 4 5 6 7 8 9 10 42 2024 2025 {"id": "name": [ ] }`)

func text(r *rand.Rand, n int) string {
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

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	rows := fs.Int("rows", 100000, "rows to generate")
	size := fs.Int("bytes", 6000, "approximate text bytes per row")
	tasks := fs.Int("tasks", 2000, "distinct task ids")
	seed := fs.Uint64("seed", 42, "generator seed")
	out := fs.String("out", "", "output JSONL file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("gen: -out is required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	r := rand.New(rand.NewPCG(*seed, *seed))
	system := "You compress the interaction history of an agent. Keep every identifier, number and fact the remaining steps need; drop everything else."
	for i := range *rows {
		task := r.IntN(*tasks)
		split := distill.SplitTrain
		if task%10 == 0 {
			split = distill.SplitValidation
		}
		in := *size * 5 / 6
		row := distill.Row{
			ID:               fmt.Sprintf("%032x", i),
			Prompt:           []distill.Message{{Role: "system", Content: system}, {Role: "user", Content: text(r, in-len(system))}},
			Completion:       []distill.Message{{Role: "assistant", Content: text(r, *size-in)}},
			Kind:             compress.KindHistory,
			Source:           distill.SourceACON,
			TaskID:           fmt.Sprintf("task-%05d", task),
			Step:             int64(r.IntN(40)),
			GuidelineID:      "g-ut1-co1",
			TeacherModel:     "gpt-4.1-2025-04-14",
			InputTokens:      int64(in / 4),
			OutputTokens:     int64((*size - in) / 4),
			CompressionRatio: 0.2,
			Split:            split,
		}
		if err := enc.Encode(&row); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func export(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	in := fs.String("in", "", "input JSONL rows (from gen)")
	out := fs.String("out", "", "output dataset directory")
	rowGroup := fs.Int("row-group-rows", 0, "rows per Parquet row group (0: default)")
	rowGroupBytes := fs.Int("row-group-bytes", 0, "text bytes per Parquet row group (0: default)")
	parquetOnly := fs.Bool("parquet-only", false, "write only the Parquet files")
	workers := fs.Int("concurrency", 0, "row groups encoded at once (0: GOMAXPROCS)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *in == "" || *out == "" {
		return errors.New("export: -in and -out are required")
	}
	start := time.Now()
	n, stats, err := exportFile(ctx, *in, *out, distill.WriterOptions{RowGroupRows: *rowGroup, RowGroupBytes: *rowGroupBytes, Concurrency: *workers, ParquetOnly: *parquetOnly})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	if n != stats.Rows() {
		return fmt.Errorf("read %d rows but the writer wrote %d", n, stats.Rows())
	}
	fmt.Printf("ours: %d rows in %.2fs: %.0f rows/s, peak RSS %d MB\n",
		n, elapsed.Seconds(), float64(n)/elapsed.Seconds(), ru.Maxrss/1024)
	return nil
}

// exportFile reads rows JSONL and writes them with distill.Writer. Lines are
// decoded concurrently in batches and handed to the Writer in file order, as
// a real export would feed it.
func exportFile(ctx context.Context, in, out string, opts distill.WriterOptions) (int, distill.WriterStats, error) {
	data, unmap, err := mapFile(in)
	if err != nil {
		return 0, distill.WriterStats{}, err
	}
	defer unmap()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, distill.WriterStats{}, err
	}
	w, err := distill.NewWriter(out, opts)
	if err != nil {
		return 0, distill.WriterStats{}, err
	}
	var (
		firstErr error
		n        int
		lines    int // of the blocks written so far
		released int // bytes of data dropped from memory
	)
	// Twice as many decoders as Ps: a stream runs ahead of its callbacks by
	// one task more than its goroutines, and the callbacks (the Writer) stop
	// while a row group waits for an encoder, so more decoders keep more
	// blocks ready for when it goes on.
	s := stream.New().WithMaxGoroutines(2 * runtime.GOMAXPROCS(0))
	// The mapped file is cut into blocks at newlines and a worker decodes a
	// block's lines straight from the mapping into a slab, which the
	// callback recycles once the Writer has the rows. Line numbers are
	// counted in the callbacks, which run in file order.
	const releaseStep = 8 << 20
	text := unsafe.String(unsafe.SliceData(data), len(data))
	for off := 0; off < len(text) && ctx.Err() == nil; {
		end := len(text)
		if end-off > blockSize {
			if i := strings.IndexByte(text[off+blockSize:], '\n'); i >= 0 {
				end = off + blockSize + i + 1
			}
		}
		block, to := text[off:end], end
		off = end
		s.Go(func() stream.Callback {
			var (
				rows []distill.Row
				derr error
				i    int
				dec  = decoders.Get().(*decoder)
				// The rows' strings and messages, recycled once the Writer
				// has them: Write keeps none of a row's memory.
				sl = slabs.get(len(block))
				at int // of the line in block
			)
			rows, dec.msgs = sl.rows[:0], sl.msgs[:0]
			defer func() {
				sl.rows, sl.msgs, dec.msgs = rows, dec.msgs, nil
				decoders.Put(dec)
			}()
			for ; len(block) > at; i++ {
				line := block[at:]
				if j := strings.IndexByte(line, '\n'); j >= 0 {
					line = line[:j]
				}
				r, err := dec.row(line, sl.text[at:])
				at += len(line) + 1
				if err != nil {
					derr = err
					break
				}
				rows = append(rows, r)
			}
			return func() {
				defer slabs.put(sl)
				first := lines + 1
				lines += i
				// Decoded pages are dropped in steps of releaseStep, in
				// file order: each madvise makes the kernel flush the
				// other threads' TLBs, so fewer, larger calls cost less.
				if to-released >= releaseStep || to == len(data) {
					release(data, released, to)
					released = to
				}
				if firstErr != nil {
					return
				}
				if derr != nil {
					firstErr = fmt.Errorf("%s:%d: %w", in, first+i, derr)
					return
				}
				for i := range rows {
					if err := w.Write(rows[i]); err != nil {
						firstErr = err
						return
					}
					n++
				}
			}
		})
	}
	s.Wait()
	stats, cerr := w.Close()
	return n, stats, errors.Join(ctx.Err(), firstErr, cerr)
}

// decoders keeps the decoders of blocks (their names) for the next ones.
var decoders = sync.Pool{New: func() any { return newDecoder() }}

// blockSize is the size of the blocks the input is cut into, at newlines.
const blockSize = 1 << 20

// slabs keeps what blocks' rows are decoded into, as many as blocks can be
// on their way (decoders, and callbacks waiting), and unlike a sync.Pool
// across garbage collections: made anew for each block, they cost zeroing,
// page faults and collections.
var slabs = slabPool{free: make(chan *slab, 32)}

type slabPool struct{ free chan *slab }

// slab is where a block's rows live until the Writer has them.
type slab struct {
	text []byte // their strings but names (decoder.row)
	rows []distill.Row
	msgs []distill.Message
}

// get returns a slab with text of at least n bytes.
func (p slabPool) get(n int) *slab {
	select {
	case s := <-p.free:
		if len(s.text) >= n {
			return s
		}
	default:
	}
	return &slab{text: make([]byte, max(n, blockSize+blockSize/4))}
}

func (p slabPool) put(s *slab) {
	select {
	case p.free <- s:
	default:
	}
}

// mapFile maps a file read-only. The rows are decoded straight from the
// page cache: reading them into buffers cost a copy of the whole file.
func mapFile(name string) ([]byte, func(), error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", name, err)
	}
	_ = syscall.Madvise(b, syscall.MADV_SEQUENTIAL)
	return b, func() { _ = syscall.Munmap(b) }, nil
}

// release drops the whole pages of data[from:to], once decoded, from the
// process: mapped pages count in its resident memory, the file's would all
// be by the end, and the decoder copied what it keeps. They stay in the
// page cache.
func release(data []byte, from, to int) {
	page := os.Getpagesize()
	from = (from + page - 1) / page * page
	to = to / page * page
	if from < to {
		_ = syscall.Madvise(data[from:to], syscall.MADV_DONTNEED)
	}
}
