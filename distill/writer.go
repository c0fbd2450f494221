package distill

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxopt/ctxopt/compress"
)

// WriterOptions tune a Writer. Zero values take the defaults.
type WriterOptions struct {
	// RowGroupRows bounds the rows of a Parquet row group (default 1000).
	RowGroupRows int
	// RowGroupBytes bounds the text of a row group (default 8 MiB), so long
	// rows make neither row groups nor the writer's memory large.
	RowGroupBytes int
	// Formats names the formats to write (default: every registered one).
	Formats []string
}

const (
	defaultRowGroupRows  = 1000
	defaultRowGroupBytes = 8 << 20
)

func (o WriterOptions) withDefaults() WriterOptions {
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = defaultRowGroupRows
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = defaultRowGroupBytes
	}
	return o
}

// Writer streams rows into the data files of a dataset directory: one file
// per split and registered format (format_*.go). Write and Close must be
// called from one goroutine. Rows must already be curated (redacted,
// de-duplicated): the Writer checks only that each row is well-formed.
type Writer struct {
	splits map[string][]*dataFile
	stats  map[string]*statsBuilder
	closed bool
}

// dataFile is one split's file in one format.
type dataFile struct {
	path string
	f    *os.File
	buf  *bufio.Writer
	rows RowWriter
}

// NewWriter creates the data files of every split under dir (created if
// needed) and returns a Writer for them.
func NewWriter(dir string, opts WriterOptions) (*Writer, error) {
	opts = opts.withDefaults()
	list, err := selectFormats(opts.Formats)
	if err != nil {
		return nil, err
	}
	w := &Writer{splits: map[string][]*dataFile{}, stats: map[string]*statsBuilder{}}
	for _, split := range splitNames {
		w.stats[split] = &statsBuilder{}
		for _, fi := range list {
			df, err := openDataFile(dir, split, fi.Format, opts)
			if err != nil {
				w.closeFiles()
				return nil, err
			}
			w.splits[split] = append(w.splits[split], df)
		}
	}
	return w, nil
}

func openDataFile(dir, split string, format Format, opts WriterOptions) (*dataFile, error) {
	rel := format.Path(split)
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create dataset directory: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", rel, err)
	}
	df := &dataFile{path: filepath.ToSlash(rel), f: f, buf: bufio.NewWriterSize(f, 1<<20)}
	if df.rows, err = format.Open(df.buf, split, opts); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", rel, err)
	}
	return df, nil
}

// Write adds a row to the split its Split field names, in every format.
func (w *Writer) Write(r Row) error {
	if w.closed {
		return errors.New("write to a closed dataset writer")
	}
	files, ok := w.splits[r.Split]
	if !ok {
		return fmt.Errorf("row %s: unknown split %q (want train or validation)", r.ID, r.Split)
	}
	if err := checkRow(&r); err != nil {
		return fmt.Errorf("row %s: %w", r.ID, err)
	}
	w.stats[r.Split].add(&r)
	for _, df := range files {
		if err := df.rows.Write(&r); err != nil {
			return fmt.Errorf("write %s: %w", df.path, err)
		}
	}
	return nil
}

// Close finishes and closes every file and returns what was written. The
// files are complete only when Close returns no error.
func (w *Writer) Close() (WriterStats, error) {
	if w.closed {
		return WriterStats{}, errors.New("dataset writer closed twice")
	}
	w.closed = true
	var errs []error
	stats := WriterStats{Splits: map[string]SplitStats{}}
	for _, split := range splitNames {
		for _, df := range w.splits[split] {
			if err := df.rows.Close(); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", df.path, err))
			}
		}
		stats.Splits[split] = w.stats[split].build()
	}
	if err := errors.Join(append(errs, w.closeFiles())...); err != nil {
		return stats, err
	}
	return stats, nil
}

// closeFiles flushes and closes every file, returning the first error.
func (w *Writer) closeFiles() error {
	var first error
	for _, files := range w.splits {
		for _, df := range files {
			err := df.buf.Flush()
			if cerr := df.f.Close(); err == nil {
				err = cerr
			}
			if err != nil && first == nil {
				first = fmt.Errorf("write %s: %w", df.path, err)
			}
		}
	}
	return first
}

// Known chat roles of a prompt. Compressor prompts use system and user; the
// completion is the assistant's.
var promptRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true}

var (
	validKind   = map[string]bool{compress.KindHistory: true, compress.KindObservation: true, KindPlanAware: true}
	validSource = map[string]bool{SourceACON: true, SourcePAACESyn: true}
	validSplit  = map[string]bool{SplitTrain: true, SplitValidation: true}
)

// checkRow returns the first way r breaks the formats (see ValidateFile), so
// that every file written validates and loads in trainers.
func checkRow(r *Row) error {
	vs := &violations{typedMessages: true}
	checkRowValues(0, r, vs)
	if len(vs.items) > 0 {
		v := vs.items[0]
		return fmt.Errorf("%s: %s", v.Field, v.Message)
	}
	return nil
}

// WriterStats describe what a Writer wrote.
type WriterStats struct {
	Splits map[string]SplitStats `json:"splits"`
}

// Rows is the number of rows over all splits.
func (s WriterStats) Rows() int {
	n := 0
	for _, sp := range s.Splits {
		n += sp.Rows
	}
	return n
}

// SplitStats describe one split.
type SplitStats struct {
	Rows                 int            `json:"rows"`
	Tasks                int            `json:"tasks"`
	InputTokens          TokenStats     `json:"input_tokens"`
	OutputTokens         TokenStats     `json:"output_tokens"`
	MeanCompressionRatio float64        `json:"mean_compression_ratio"`
	ByKind               map[string]int `json:"by_kind"`
}

// TokenStats summarise a token count over the rows of a split.
type TokenStats struct {
	Total int64   `json:"total"`
	Min   int64   `json:"min"`
	Mean  float64 `json:"mean"`
	P50   int64   `json:"p50"`
	P95   int64   `json:"p95"`
	Max   int64   `json:"max"`
}

type statsBuilder struct {
	in, out  []int64
	ratioSum float64
	tasks    map[string]struct{}
	byKind   map[string]int
}

func (b *statsBuilder) add(r *Row) {
	if b.tasks == nil {
		b.tasks = map[string]struct{}{}
		b.byKind = map[string]int{}
	}
	b.in = append(b.in, r.InputTokens)
	b.out = append(b.out, r.OutputTokens)
	b.ratioSum += r.CompressionRatio
	b.tasks[r.TaskID] = struct{}{}
	b.byKind[r.Kind]++
}

func (b *statsBuilder) build() SplitStats {
	s := SplitStats{
		Rows:         len(b.in),
		Tasks:        len(b.tasks),
		InputTokens:  tokenStats(b.in),
		OutputTokens: tokenStats(b.out),
		ByKind:       map[string]int{},
	}
	for k, n := range b.byKind {
		s.ByKind[k] = n
	}
	if s.Rows > 0 {
		s.MeanCompressionRatio = round4(b.ratioSum / float64(s.Rows))
	}
	return s
}

func tokenStats(xs []int64) TokenStats {
	if len(xs) == 0 {
		return TokenStats{}
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	var total int64
	for _, x := range sorted {
		total += x
	}
	// Nearest-rank percentiles: always a value that occurs.
	rank := func(p float64) int64 {
		i := int(math.Ceil(p*float64(len(sorted)))) - 1
		return sorted[max(i, 0)]
	}
	return TokenStats{
		Total: total,
		Min:   sorted[0],
		Mean:  round4(float64(total) / float64(len(sorted))),
		P50:   rank(0.50),
		P95:   rank(0.95),
		Max:   sorted[len(sorted)-1],
	}
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
