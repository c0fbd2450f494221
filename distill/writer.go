package distill

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/sourcegraph/conc/stream"

	"github.com/ctxopt/ctxopt/compress"
)

// WriterOptions tune a Writer. Zero values take the defaults.
type WriterOptions struct {
	// RowGroupRows bounds the rows of a Parquet row group (default 1000).
	RowGroupRows int
	// RowGroupBytes bounds the text of a row group (default 8 MiB), so long
	// rows make neither row groups nor the writer's memory large.
	RowGroupBytes int
	// Concurrency is how many row groups are encoded and compressed at once
	// (default GOMAXPROCS).
	Concurrency int
	// ParquetOnly writes data/SPLIT.parquet alone, without the JSONL files:
	// the export benchmark compares it with DuckDB writing only Parquet.
	ParquetOnly bool
}

const (
	defaultRowGroupRows  = 1000
	defaultRowGroupBytes = 8 << 20
	// pageBufferSize is the uncompressed size of a Parquet page. Each page
	// is one call into libzstd, and a cgo call that long gives its P back to
	// the scheduler, which wakes threads to take it over and to return it:
	// pages of 4 MiB made a quarter of the calls of 1 MiB ones and the
	// export about 3% faster (bench/distill.sh, paired), for ~35 MB more
	// peak RSS, and compress as well. DuckDB writes one page per chunk.
	pageBufferSize = 4 << 20
)

// zstdCodec is zstd at level 1 (zstd_cgo.go, zstd_nocgo.go): it trades some
// file size (7% on the benchmark's rows) for half the compression time of
// the default level, and compression is most of an export's CPU. Workers
// share it.
var zstdCodec = newZstdCodec()

func (o WriterOptions) withDefaults() WriterOptions {
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = defaultRowGroupRows
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = defaultRowGroupBytes
	}
	if o.Concurrency <= 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	return o
}

// File names inside a dataset directory.
func jsonlName(split string) string    { return split + ".jsonl" }
func messagesName(split string) string { return split + ".messages.jsonl" }
func parquetName(split string) string  { return filepath.Join("data", split+".parquet") }

// Writer streams rows into the data files of a dataset directory: per split,
// SPLIT.jsonl (prompt–completion with metadata), SPLIT.messages.jsonl
// (OpenAI chat fine-tuning lines) and data/SPLIT.parquet (zstd, plain or
// dictionary strings, message lists as LIST of STRUCT, bounded row groups).
// Rows are batched into row groups that are encoded and compressed
// concurrently and committed in order, so the output is the same for the same
// rows whatever the concurrency, and memory stays bounded by a few row groups.
//
// Write and Close must be called from one goroutine. Rows must already be
// curated (redacted, de-duplicated): the Writer checks only that each row is
// well-formed.
type Writer struct {
	dir      string
	opts     WriterOptions
	splits   map[string]*splitWriter
	stream   *stream.Stream
	encoders *encoderPool

	mu  sync.Mutex
	err error // first failure of an encoding task or a commit

	closed bool
}

type splitWriter struct {
	name       string
	jsonl      *asyncFile
	messages   *asyncFile
	parquetOut *asyncFile
	parquet    *parquetFile
	batch      []Row
	texts      *messageTexts // the batch's message texts
	kept       keptStrings
	batchBytes int
	stats      statsBuilder
}

// NewWriter creates the data files of every split under dir (created if
// needed) and returns a Writer for them.
func NewWriter(dir string, opts WriterOptions) (*Writer, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("create dataset directory: %w", err)
	}
	w := &Writer{
		dir:      dir,
		opts:     opts,
		splits:   map[string]*splitWriter{},
		stream:   stream.New().WithMaxGoroutines(opts.Concurrency),
		encoders: newEncoderPool(opts.Concurrency),
	}
	for _, name := range splitNames {
		sw, err := w.openSplit(name)
		w.splits[name] = sw
		if err != nil {
			w.closeFiles()
			return nil, err
		}
	}
	return w, nil
}

func (w *Writer) openSplit(name string) (*splitWriter, error) {
	sw := &splitWriter{name: name}
	open := func(rel string) (*asyncFile, error) {
		f, err := os.Create(filepath.Join(w.dir, rel))
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", rel, err)
		}
		return newAsyncFile(f, rel), nil
	}
	var err error
	if !w.opts.ParquetOnly {
		if sw.jsonl, err = open(jsonlName(name)); err != nil {
			return sw, err
		}
		if sw.messages, err = open(messagesName(name)); err != nil {
			return sw, err
		}
	}
	if sw.parquetOut, err = open(parquetName(name)); err != nil {
		return sw, err
	}
	if sw.parquet, err = newParquetFile(sw.parquetOut, name); err != nil {
		return sw, fmt.Errorf("write %s: %w", parquetName(name), err)
	}
	return sw, nil
}

func (sw *splitWriter) files() []*asyncFile {
	var fs []*asyncFile
	for _, f := range []*asyncFile{sw.jsonl, sw.messages, sw.parquetOut} {
		if f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// Write adds a row to the split its Split field names. It keeps none of
// r's memory once it returns: the texts are copied into the pages and the
// rest into strings of its own (keptStrings), so a caller may reuse it.
func (w *Writer) Write(r Row) error {
	if w.closed {
		return errors.New("write to a closed dataset writer")
	}
	if err := w.failure(); err != nil {
		return err
	}
	sw, ok := w.splits[r.Split]
	if !ok {
		return fmt.Errorf("row %s: unknown split %q (want train or validation)", r.ID, r.Split)
	}
	if err := checkRow(&r); err != nil {
		return fmt.Errorf("row %s: %w", r.ID, err)
	}
	if sw.texts == nil {
		sw.texts = w.encoders.newMessageTexts()
	}
	if err := sw.texts.add(&r); err != nil {
		return fmt.Errorf("row %s: %w", r.ID, err)
	}
	r.Split = sw.name
	sw.stats.add(sw.kept.names(&r))
	// JSON lines are cheap to encode and must be written in order anyway, so
	// they are encoded here, straight into the files' buffers; workers only
	// encode and compress Parquet.
	if !w.opts.ParquetOnly {
		if err := sw.jsonl.appendLine(func(b []byte) []byte { return appendRowJSON(b, &r) }); err != nil {
			return err
		}
		if err := sw.messages.appendLine(func(b []byte) []byte { return appendMessagesLineJSON(b, &r) }); err != nil {
			return err
		}
	}
	sw.batchBytes += rowBytes(&r)
	sw.batch = append(sw.batch, sw.kept.row(&r))
	if len(sw.batch) >= w.opts.RowGroupRows || sw.batchBytes >= w.opts.RowGroupBytes {
		w.flushBatch(sw)
	}
	return nil
}

// flushBatch hands the pending rows of a split to the stream: a worker
// encodes and compresses them into a Parquet row group, and the stream's
// single callback goroutine commits the row groups in submission order.
func (w *Writer) flushBatch(sw *splitWriter) {
	if len(sw.batch) == 0 {
		return
	}
	batch, texts, textBytes := sw.batch, sw.texts, sw.batchBytes
	sw.batch, sw.texts, sw.batchBytes = make([]Row, 0, len(batch)), nil, 0
	w.stream.Go(func() stream.Callback {
		rg, err := w.encoders.encode(batch, texts, textBytes)
		return func() {
			if w.failure() != nil {
				return
			}
			if err == nil {
				err = sw.parquet.commit(rg)
			}
			if err != nil {
				w.fail(fmt.Errorf("write %s: %w", parquetName(sw.name), err))
			}
		}
	})
}

func (w *Writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// Close writes the pending rows and the Parquet footers, closes every file, and returns what was written. The files are complete only when
// Close returns no error.
func (w *Writer) Close() (WriterStats, error) {
	if w.closed {
		return WriterStats{}, errors.New("dataset writer closed twice")
	}
	w.closed = true
	for _, name := range splitNames {
		w.flushBatch(w.splits[name])
	}
	w.stream.Wait()
	err := w.failure()
	stats := WriterStats{Splits: map[string]SplitStats{}}
	for _, name := range splitNames {
		sw := w.splits[name]
		if err == nil {
			err = sw.finish()
		}
		stats.Splits[name] = sw.stats.build()
	}
	if cerr := w.closeFiles(); err == nil {
		err = cerr
	}
	if err != nil {
		return stats, err
	}
	return stats, nil
}

func (sw *splitWriter) finish() error {
	if err := sw.parquet.close(); err != nil {
		return fmt.Errorf("write %s: %w", parquetName(sw.name), err)
	}
	return nil
}

// closeFiles writes out and closes every file, returning the first error.
func (w *Writer) closeFiles() error {
	var first error
	for _, name := range splitNames {
		sw := w.splits[name]
		if sw == nil {
			continue
		}
		for _, f := range sw.files() {
			if err := f.close(); err != nil && first == nil {
				first = err
			}
		}
		sw.jsonl, sw.messages, sw.parquetOut = nil, nil, nil
	}
	return first
}

// keptStrings makes the copies of a row's strings that a split's batch
// and statistics keep, so that Write keeps none of the caller's memory: a
// caller may reuse it once Write returns (bench/distill's reader decodes
// into buffers it recycles). The texts are copied into the pages
// (messageTexts); names repeat from row to row, so the last copy of each
// serves while they do.
type keptStrings struct {
	kind, source, task, guideline, teacher string
	roles                                  []string // the roles seen, at most a few (checkRow)
	msgs                                   []Message
}

// names replaces r's names (not its id, messages or split) with kept
// copies and returns r.
func (k *keptStrings) names(r *Row) *Row {
	for _, f := range []struct{ kept, v *string }{
		{&k.kind, &r.Kind}, {&k.source, &r.Source}, {&k.task, &r.TaskID},
		{&k.guideline, &r.GuidelineID}, {&k.teacher, &r.TeacherModel},
	} {
		if *f.v != *f.kept {
			*f.kept = strings.Clone(*f.v)
		}
		*f.v = *f.kept
	}
	return r
}

// row returns what a batch keeps of r, whose names are already kept: a
// copy of its id, and its messages' roles without their texts.
func (k *keptStrings) row(r *Row) Row {
	kept := *r
	kept.ID = strings.Clone(r.ID)
	kept.Prompt, kept.Completion = k.messages(r.Prompt), k.messages(r.Completion)
	return kept
}

func (k *keptStrings) messages(ms []Message) []Message {
	if ms == nil {
		return nil
	}
	// Batches' messages come from chunks, not an allocation a row.
	if cap(k.msgs)-len(k.msgs) < len(ms) {
		k.msgs = make([]Message, 0, max(len(ms), 4096))
	}
	start := len(k.msgs)
	for i := range ms {
		k.msgs = append(k.msgs, Message{Role: k.role(ms[i].Role)})
	}
	return k.msgs[start:len(k.msgs):len(k.msgs)]
}

func (k *keptStrings) role(v string) string {
	for _, r := range k.roles {
		if r == v {
			return r
		}
	}
	v = strings.Clone(v)
	k.roles = append(k.roles, v)
	return v
}

func rowBytes(r *Row) int {
	n := len(r.ID) + len(r.TaskID) + len(r.GuidelineID) + len(r.TeacherModel) + 64
	for _, m := range r.Prompt {
		n += len(m.Role) + len(m.Content)
	}
	for _, m := range r.Completion {
		n += len(m.Role) + len(m.Content)
	}
	return n
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
	vs := &violations{typedMessages: true, textsChecked: true}
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
