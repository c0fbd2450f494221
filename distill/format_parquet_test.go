package distill

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// normalized gives empty lists one form: readers return nil or empty.
func normalized(rows []Row) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		if len(r.Prompt) == 0 {
			r.Prompt = nil
		}
		if len(r.Completion) == 0 {
			r.Completion = nil
		}
		out[i] = r
	}
	return out
}

// duckdbRows has DuckDB read every row of each file, in file order.
func duckdbRows(t *testing.T, paths ...string) [][]Row {
	t.Helper()
	out := runDuckDBCheck(t, append([]string{"--rows"}, paths...)...)
	var report struct {
		Files []struct {
			RowsJSON []string `json:"rows_json"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("duckdb-check output: %v", err)
	}
	if len(report.Files) != len(paths) {
		t.Fatalf("DuckDB read %d files of %d", len(report.Files), len(paths))
	}
	files := make([][]Row, len(paths))
	for f, file := range report.Files {
		files[f] = make([]Row, len(file.RowsJSON))
		for i, line := range file.RowsJSON {
			if err := json.Unmarshal([]byte(line), &files[f][i]); err != nil {
				t.Fatalf("%s row %d: %v", paths[f], i, err)
			}
		}
	}
	return files
}

// randomRows are rows of any valid UTF-8 (control characters, NUL, every
// plane), empty and long strings, empty and long message lists,
// dictionaries of one to hundreds of values, in half the sets one text over
// a page, and extreme numbers, NaN only when nan is set.
func randomRows(r *rand.Rand, n int, nan bool) []Row {
	runes := func(n int) string {
		var b strings.Builder
		for range n {
			switch r.IntN(8) {
			case 0:
				b.WriteRune(rune(r.IntN(0x20))) // controls, NUL
			case 1:
				b.WriteRune(rune(0x80 + r.IntN(0x780))) // two bytes
			case 2:
				b.WriteRune(rune(0xe000 + r.IntN(0x2000))) // three bytes, above the surrogates
			case 3:
				b.WriteRune(rune(0x10000 + r.IntN(0x100000))) // four bytes, up to U+10FFFF
			default:
				b.WriteByte(byte(0x20 + r.IntN(0x5f)))
			}
		}
		return b.String()
	}
	text := func() string {
		if r.IntN(30) == 0 {
			return ""
		}
		return runes(r.IntN(60))
	}
	pool := func() func() string {
		values := make([]string, []int{1, 2, 7, 300}[r.IntN(4)])
		for i := range values {
			values[i] = runes(r.IntN(12))
		}
		return func() string { return values[r.IntN(len(values))] }
	}
	integer := func() int64 {
		return []int64{math.MinInt64, math.MaxInt64, 0, -1, 1, r.Int64(), -r.Int64()}[r.IntN(7)]
	}
	negZero := math.Copysign(0, -1)
	floats := []float64{0, negZero, math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, r.NormFloat64() * 1e300, r.Float64()}
	if nan {
		floats = append(floats, math.NaN())
	}
	kind, source, task, guideline, teacher, split, role := pool(), pool(), pool(), pool(), pool(), pool(), pool()
	messages := func() []Message {
		ms := make([]Message, []int{0, 1, 2, 3, 40}[r.IntN(5)])
		for i := range ms {
			ms[i] = Message{Role: role(), Content: text()}
		}
		return ms
	}
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{
			ID:               runes(r.IntN(40)),
			Prompt:           messages(),
			Completion:       messages(),
			Kind:             kind(),
			Source:           source(),
			TaskID:           task(),
			Step:             integer(),
			GuidelineID:      guideline(),
			TeacherModel:     teacher(),
			InputTokens:      integer(),
			OutputTokens:     integer(),
			CompressionRatio: floats[r.IntN(len(floats))],
			Split:            split(),
		}
	}
	if n > 0 && r.IntN(2) == 0 { // a text over a page (about a megabyte)
		row := &rows[r.IntN(n)]
		row.Prompt = append(row.Prompt, Message{Role: role(), Content: strings.Repeat(runes(16), 45000)})
	}
	return rows
}

// openFile opens an encoded file with parquet-go.
func openFile(t *testing.T, data []byte) *parquet.File {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// readRows reads a file's rows with parquet-go's reader.
func readRows(t *testing.T, data []byte) []Row {
	t.Helper()
	pf := openFile(t, data)
	rows := make([]Row, pf.NumRows())
	if n, err := parquet.NewGenericReader[Row](pf).Read(rows); n != len(rows) {
		t.Fatalf("read %d rows of %d: %v", n, len(rows), err)
	}
	return rows
}

// sameRows reports the first row where got and want differ (NaN equals
// NaN, -0.0 differs from +0.0), or -1.
func sameRows(got, want []Row) int {
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	got, want = normalized(got), normalized(want)
	for i := range got {
		g, w := got[i], want[i]
		if math.Float64bits(g.CompressionRatio) != math.Float64bits(w.CompressionRatio) {
			return i
		}
		g.CompressionRatio, w.CompressionRatio = 0, 0
		if !reflect.DeepEqual(g, w) {
			return i
		}
	}
	return -1
}

// TestDuckDBReadsRandomRows has DuckDB read back a sample of the property
// test's random rows (finite numbers: its JSON writes infinities as a bare
// Infinity, which is no JSON).
func TestDuckDBReadsRandomRows(t *testing.T) {
	var paths []string
	var want [][]Row
	for seed := range uint64(3) {
		r := rand.New(rand.NewPCG(seed, 0xd0c))
		rows := randomRows(r, 40+r.IntN(80), false)
		for i := range rows {
			if math.IsInf(rows[i].CompressionRatio, 0) {
				rows[i].CompressionRatio = math.Copysign(math.MaxFloat64, rows[i].CompressionRatio)
			}
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("rows-%d.parquet", seed))
		if err := os.WriteFile(path, writeParquetRows(t, rows, WriterOptions{RowGroupRows: []int{1, 7, 64}[seed]}), 0o644); err != nil {
			t.Fatal(err)
		}
		paths, want = append(paths, path), append(want, rows)
	}
	for f, got := range duckdbRows(t, paths...) {
		if i := sameRows(got, want[f]); i >= 0 {
			t.Errorf("%s: DuckDB read row %d of %d as\n%.500q\nwant\n%.500q", paths[f], i, len(got),
				fmt.Sprintf("%+v", got[min(i, len(got)-1)]), fmt.Sprintf("%+v", want[f][i]))
		}
	}
}

// writeParquetRows writes rows as a train split through the Parquet format.
func writeParquetRows(t *testing.T, rows []Row, opts WriterOptions) []byte {
	t.Helper()
	return []byte(writeFormat(t, parquetFormat{}, opts, rows...))
}

// TestParquetFormat reads tricky rows back with parquet-go and checks what
// other readers rely on: row groups bounded in rows and in bytes, zstd,
// plain or dictionary strings, the split in the key-value metadata, and
// column-index bounds no longer than statsMaxBytes.
func TestParquetFormat(t *testing.T) {
	rows := randomRows(rand.New(rand.NewPCG(7, 7)), 300, true)
	for _, tc := range []struct {
		name     string
		opts     WriterOptions
		maxRows  int64
		minGroup int
	}{
		{"rows bound", WriterOptions{RowGroupRows: 13}, 13, 300 / 13},
		{"bytes bound", WriterOptions{RowGroupBytes: 4096}, defaultRowGroupRows, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := writeParquetRows(t, rows, tc.opts)
			if i := sameRows(readRows(t, data), rows); i >= 0 {
				t.Fatalf("row %d reads back differently", i)
			}
			pf := openFile(t, data)
			md := pf.Metadata()
			if len(md.RowGroups) < tc.minGroup {
				t.Errorf("%d row groups, want at least %d", len(md.RowGroups), tc.minGroup)
			}
			if !slices.Contains(md.KeyValueMetadata, format.KeyValue{Key: "ctxopt.split", Value: SplitTrain}) {
				t.Errorf("key-value metadata %v, want the split", md.KeyValueMetadata)
			}
			for g, rg := range md.RowGroups {
				if rg.NumRows > tc.maxRows {
					t.Errorf("row group %d: %d rows, bound %d", g, rg.NumRows, tc.maxRows)
				}
				for _, cc := range rg.Columns {
					col := strings.Join(cc.MetaData.PathInSchema, ".")
					if cc.MetaData.Codec != format.Zstd {
						t.Errorf("%s: codec %s", col, cc.MetaData.Codec)
					}
					if slices.ContainsFunc(cc.MetaData.Encoding, func(e format.Encoding) bool {
						return e == format.DeltaLengthByteArray || e == format.DeltaByteArray
					}) {
						t.Errorf("%s: encodings %v, want no DELTA strings", col, cc.MetaData.Encoding)
					}
				}
			}
			for _, rg := range pf.RowGroups() {
				for _, cc := range rg.ColumnChunks() {
					ci, err := cc.ColumnIndex()
					if err != nil {
						t.Fatal(err)
					}
					for p := range ci.NumPages() {
						if len(ci.MinValue(p).Bytes()) > statsMaxBytes || len(ci.MaxValue(p).Bytes()) > statsMaxBytes {
							t.Fatalf("column %d page %d: index bounds over %d bytes", cc.Column(), p, statsMaxBytes)
						}
					}
				}
			}
		})
	}
}

// editFooter rewrites a file's footer.
func editFooter(t *testing.T, data []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	body, footer := data[:len(data)-8-n], data[len(data)-8-n:len(data)-8]
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, &md); err != nil {
		t.Fatal(err)
	}
	edit(&md)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(body), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// TestValidateStatistics: validate reports a value outside its row group's
// statistics (readers filtering on them would skip its row) and accepts
// the writer's own.
func TestValidateStatistics(t *testing.T) {
	rows := make([]Row, 40)
	for i := range rows {
		rows[i] = testRow(i, SplitTrain)
	}
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	tests := []struct {
		name   string
		column string // "" for the writer's statistics
		edit   func(st *format.Statistics)
	}{
		{"the writer's bounds", "", nil},
		{"string max below a value", "id", func(st *format.Statistics) { st.MaxValue = []byte("0") }},
		{"string min above a value", "task_id", func(st *format.Statistics) { st.MinValue = []byte("zz") }},
		{"list element max below a value", "prompt.list.element.role", func(st *format.Statistics) { st.MaxValue = []byte("a") }},
		{"int64 min above a value", "step", func(st *format.Statistics) { st.MinValue = le(1 << 40) }},
		{"double max below a value", "compression_ratio", func(st *format.Statistics) { st.MaxValue = le(math.Float64bits(-1)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := editFooter(t, writeParquetRows(t, rows, WriterOptions{RowGroupRows: 13}), func(md *format.FileMetaData) {
				for i, cc := range md.RowGroups[1].Columns {
					if strings.Join(cc.MetaData.PathInSchema, ".") == tt.column {
						tt.edit(&md.RowGroups[1].Columns[i].MetaData.Statistics)
					}
				}
			})
			path := filepath.Join(t.TempDir(), "train.parquet")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			vs, err := ValidateFile(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.column == "" {
				if len(vs) != 0 {
					t.Errorf("violations %v, want none", vs)
				}
				return
			}
			if len(vs) != 1 || vs[0].Field != tt.column || !strings.Contains(vs[0].Message, "row group 1") {
				t.Errorf("violations %v, want one for %s in row group 1", vs, tt.column)
			}
		})
	}
}

func TestValidateDamagedParquet(t *testing.T) {
	rows := make([]Row, 6)
	for i := range rows {
		rows[i] = testRow(i, SplitTrain)
	}
	good := writeParquetRows(t, rows, WriterOptions{RowGroupRows: 2})
	panics, err := os.ReadFile("testdata/damaged/reader-panic.parquet")
	if err != nil {
		t.Fatal(err)
	}
	// A bit of the last row group's first page body: parquet-go checks the
	// pages' CRC-32.
	md := openFile(t, good).Metadata()
	last := md.RowGroups[len(md.RowGroups)-1].Columns[0].MetaData
	flipped := bytes.Clone(good)
	flipped[last.DataPageOffset+last.TotalCompressedSize-1] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated footer", good[:len(good)-10], "not a readable Parquet file"},
		{"flipped bit in a page", flipped, "damaged file (write it again): row group"},
		{"reader panic", panics, "the Parquet reader failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if raceDetector && bytes.Equal(tc.data, panics) {
				t.Skip("under -race, parquet-go's panic on this file is a fatal checkptr error")
			}
			path := filepath.Join(t.TempDir(), "train.parquet")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			vs, err := ValidateFile(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(vs, func(v Violation) bool { return v.File == path && strings.Contains(v.Message, tc.want) }) {
				t.Errorf("violations %v; want one naming the file with %q", vs, tc.want)
			}
		})
	}
}
