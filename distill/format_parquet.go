package distill

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// parquetFormat writes data/SPLIT.parquet with parquet-go's writer: Row's
// tags give the schema (message lists in the standard LIST layout, plain or
// dictionary strings, which every reader takes), pages are zstd-compressed,
// and row groups are bounded in rows and in text bytes, so the writer's
// memory is bounded by one row group.
type parquetFormat struct{}

func init() {
	RegisterFormat(FormatInfo{
		Name:        "parquet",
		Description: "prompt–completion rows with metadata, Parquet (zstd)",
		Format:      parquetFormat{},
	})
}

func (parquetFormat) Path(split string) string { return filepath.Join("data", split+".parquet") }

// statsMaxBytes bounds the string bounds of column indexes, as Arrow's
// writer (64 bytes) does. parquet-go truncates no other statistics, so the
// message texts, which may be pages long, keep no statistics in page
// headers (the column index has them, truncated).
const statsMaxBytes = 64

// zstdCodec is klauspost's pure-Go zstd at its fastest level (about zstd
// level 1): it trades some file size for half the compression time of the
// default level, and compression is most of an export's CPU.
var zstdCodec = &zstd.Codec{Level: zstd.SpeedFastest}

func (parquetFormat) Open(w io.Writer, split string, opts WriterOptions) (RowWriter, error) {
	opts = opts.withDefaults()
	pw := parquet.NewGenericWriter[Row](w,
		parquet.Compression(zstdCodec),
		parquet.ColumnIndexSizeLimit(func([]string) int { return statsMaxBytes }),
		parquet.SkipPageStatistics("prompt", "list", "element", "content"),
		parquet.SkipPageStatistics("completion", "list", "element", "content"),
		parquet.KeyValueMetadata("ctxopt.split", split),
		// A fixed created_by, not parquet-go's build: the same rows give
		// the same bytes in every build.
		parquet.CreatedBy("ctxopt", "1", "distill"),
	)
	return &parquetSplit{w: pw, maxRows: opts.RowGroupRows, maxBytes: opts.RowGroupBytes}, nil
}

// parquetSplit cuts a row group at maxRows rows or once its text passes
// maxBytes (parquet-go's MaxRowsPerRowGroup counts rows only, and a file is
// one row group unless cut).
type parquetSplit struct {
	w                 *parquet.GenericWriter[Row]
	row               [1]Row
	rows, bytes       int
	maxRows, maxBytes int
}

func (p *parquetSplit) Write(r *Row) error {
	p.row[0] = *r
	_, err := p.w.Write(p.row[:])
	p.row[0] = Row{}
	if err != nil {
		return fmt.Errorf("write parquet row: %w", err)
	}
	p.rows++
	if p.bytes += rowBytes(r); p.rows >= p.maxRows || p.bytes >= p.maxBytes {
		p.rows, p.bytes = 0, 0
		if err := p.w.Flush(); err != nil {
			return fmt.Errorf("write parquet row group: %w", err)
		}
	}
	return nil
}

func (p *parquetSplit) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("write parquet footer: %w", err)
	}
	return nil
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
