package distill

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
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

// encoderRows are rows that reach every path of the encoder: texts long
// enough to fill several pages in one row group, empty lists and strings,
// one-entry dictionaries (bit width 0), dictionaries of hundreds of entries,
// non-ASCII text and extreme numbers.
// bigText is the size of encoderRows' long texts: three fill a page.
const bigText = pageBufferSize * 3 / 10

func encoderRows(n int) []Row {
	r := rand.New(rand.NewPCG(7, 11))
	text := func(size int) string {
		words := []string{"agent", "api", "é", "中文", "😀", `"quoted"`, `back\slash`, "\n", "\t", "42", ""}
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	rows := make([]Row, n)
	for i := range rows {
		size := 200
		if i%7 == 0 && i < 60 {
			size = bigText // three of these fill a page
		}
		rows[i] = Row{
			ID:               fmt.Sprintf("%032x", r.Uint64()),
			Prompt:           []Message{{Role: "system", Content: text(50)}, {Role: "user", Content: text(size)}},
			Completion:       []Message{{Role: "assistant", Content: text(size / 4)}},
			Kind:             "history",
			Source:           SourceACON,
			TaskID:           fmt.Sprintf("task-%d", (i*7)%400), // 400 entries: indices of 9 bits
			Step:             int64(r.IntN(100)) - 3,
			GuidelineID:      "g",
			TeacherModel:     "teacher",
			InputTokens:      r.Int64(),
			OutputTokens:     math.MinInt64 + int64(i),
			CompressionRatio: r.Float64(),
			Split:            SplitTrain,
		}
		switch i % 11 {
		case 3:
			rows[i].Completion = nil
		case 5:
			rows[i].Prompt = nil
			rows[i].ID = ""
		case 8:
			rows[i].Prompt = append(rows[i].Prompt, Message{Role: "assistant", Content: ""}, Message{Role: "user", Content: "again"})
		}
	}
	return rows
}

// writeEncoded writes rows as row groups of groupRows with the encoder and
// returns the file's bytes.
func writeEncoded(t *testing.T, rows []Row, groupRows int) []byte {
	t.Helper()
	return writeEdited(t, rows, groupRows, func(int, *encodedRowGroup) {})
}

// writeEdited is writeEncoded with edit applied to each encoded row group
// (by its index) before it is committed: a way to write wrong metadata.
func writeEdited(t *testing.T, rows []Row, groupRows int, edit func(g int, rg *encodedRowGroup)) []byte {
	t.Helper()
	var b bytes.Buffer
	f, err := newParquetFile(&b, SplitTrain)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(rows); start += groupRows {
		group := rows[start:min(start+groupRows, len(rows))]
		rg, err := encodeRows(t, group)
		if err != nil {
			t.Fatal(err)
		}
		edit(start/groupRows, rg)
		if err := f.commit(rg); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

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

// TestParquetEncoderRoundTrip reads the encoder's files back with
// parquet-go's reader, and checks the metadata other readers rely on.
func TestParquetEncoderRoundTrip(t *testing.T) {
	rows := encoderRows(600)
	for _, groupRows := range []int{1, 13, 600} {
		t.Run(fmt.Sprintf("%d rows per group", groupRows), func(t *testing.T) {
			data := writeEncoded(t, rows, groupRows)
			pf := openFile(t, data)
			got := make([]Row, len(rows))
			rd := parquet.NewGenericReader[Row](pf)
			if n, err := rd.Read(got); n != len(rows) {
				t.Fatalf("read %d rows of %d: %v", n, len(rows), err)
			}
			if !reflect.DeepEqual(normalized(got), normalized(rows)) {
				for i := range rows {
					if !reflect.DeepEqual(normalized(got[i:i+1]), normalized(rows[i:i+1])) {
						t.Fatalf("row %d read back as\n%+v\nwant\n%+v", i, got[i], rows[i])
					}
				}
			}

			md := pf.Metadata()
			if md.NumRows != int64(len(rows)) || len(md.RowGroups) != (len(rows)+groupRows-1)/groupRows {
				t.Errorf("footer: %d rows in %d row groups", md.NumRows, len(md.RowGroups))
			}
			if md.CreatedBy != parquetCreatedBy || len(md.KeyValueMetadata) != 1 || md.KeyValueMetadata[0] != (format.KeyValue{Key: "ctxopt.split", Value: SplitTrain}) {
				t.Errorf("footer: created_by %q, key-values %v", md.CreatedBy, md.KeyValueMetadata)
			}
			first := md.RowGroups[0].Columns
			if s := first[colStep].MetaData.Statistics; len(s.MinValue) != 8 || len(s.MaxValue) != 8 {
				t.Errorf("step statistics %+v", s)
			}
			// Texts get bounds truncated to statsMaxBytes (these are longer).
			if s := first[colPromptContent].MetaData.Statistics; s.MaxValue == nil || len(s.MinValue) > statsMaxBytes || len(s.MaxValue) > statsMaxBytes {
				t.Errorf("text bounds: %d and %d bytes, want a max and at most %d bytes each", len(s.MinValue), len(s.MaxValue), statsMaxBytes)
			}
			var nulls int64
			for _, g := range md.RowGroups {
				nulls += g.Columns[colCompletionContent].MetaData.Statistics.NullCount
			}
			if want := int64(countEmpty(rows, func(r Row) []Message { return r.Completion })); nulls != want {
				t.Errorf("completion null count %d, want %d (empty lists)", nulls, want)
			}
		})
	}
}

func countEmpty(rows []Row, list func(Row) []Message) int {
	n := 0
	for _, r := range rows {
		if len(list(r)) == 0 {
			n++
		}
	}
	return n
}

// TestParquetEncoderPages checks that long texts are split into pages of
// about pageBufferSize, each ending at a row's end.
func TestParquetEncoderPages(t *testing.T) {
	rows := encoderRows(60)
	data := writeEncoded(t, rows, len(rows))
	pf := openFile(t, data)
	pages := pf.RowGroups()[0].ColumnChunks()[colPromptContent].Pages()
	defer pages.Close()
	var n, rowsSeen int64
	for {
		p, err := pages.ReadPage()
		if err != nil {
			break
		}
		n++
		rowsSeen += p.NumRows()
		if p.Size() > pageBufferSize+bigText+(10<<10) {
			t.Errorf("page %d holds %d bytes", n, p.Size())
		}
		parquet.Release(p)
	}
	if n < 3 || rowsSeen != int64(len(rows)) {
		t.Errorf("%d pages holding %d rows; want several holding %d", n, rowsSeen, len(rows))
	}
}

// TestDuckDBReadsEncoderValues has DuckDB, an independent reader, read every
// value of the encoder's tricky rows back.
func TestDuckDBReadsEncoderValues(t *testing.T) {
	rows := encoderRows(60)
	path := filepath.Join(t.TempDir(), "rows.parquet")
	if err := os.WriteFile(path, writeEncoded(t, rows, 13), 0o644); err != nil {
		t.Fatal(err)
	}
	got := duckdbRows(t, path)[0]
	if i := sameRows(got, rows); i >= 0 {
		t.Fatalf("DuckDB read row %d of %d as\n%.300s\nwant\n%+.300v", i, len(got), fmt.Sprintf("%+v", got[min(i, len(got)-1)]), rows[i])
	}
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

// filePages walks every page of an encoded file by its headers, and checks
// that the footer's offsets, sizes and counts agree with the pages.
func filePages(t *testing.T, data []byte) []parquetPage {
	t.Helper()
	pf := openFile(t, data)
	md := pf.Metadata()
	var pages []parquetPage
	if err := parquetPages(bytes.NewReader(data), md, func(p parquetPage) error {
		p.body = bytes.Clone(p.body)
		pages = append(pages, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	badFileOffset := false
	for g, rg := range md.RowGroups {
		var compressed, uncompressed int64
		for col, c := range rg.Columns {
			cmd := c.MetaData
			if c.FileOffset != 0 && !badFileOffset {
				badFileOffset = true // once a file
				t.Errorf("row group %d column %d: file_offset %d; want 0 (deprecated, no ColumnMetaData outside the footer)", g, col, c.FileOffset)
			}
			var values, rows, chunkCompressed, chunkUncompressed int64
			dataPages := 0
			for _, p := range pages {
				if p.rowGroup != g || p.column != col {
					continue
				}
				switch p.header.Type {
				case format.DictionaryPage:
					if p.offset != cmd.DictionaryPageOffset || dataPages > 0 || col == 0 && p.offset != rg.FileOffset {
						t.Errorf("row group %d column %d: dictionary page at %d, footer says %d (row group at %d)", g, col, p.offset, cmd.DictionaryPageOffset, rg.FileOffset)
					}
				case format.DataPageV2:
					if dataPages == 0 && (p.offset != cmd.DataPageOffset || cmd.DictionaryPageOffset == 0 && col == 0 && p.offset != rg.FileOffset) {
						t.Errorf("row group %d column %d: first data page at %d, footer says %d (row group at %d)", g, col, p.offset, cmd.DataPageOffset, rg.FileOffset)
					}
					dataPages++
					v := p.header.DataPageHeaderV2.V
					values += int64(v.NumValues)
					rows += int64(v.NumRows)
				default:
					t.Errorf("row group %d column %d: page of type %s", g, col, p.header.Type)
				}
				chunkCompressed += p.headerLen + int64(p.header.CompressedPageSize)
				chunkUncompressed += p.headerLen + int64(p.header.UncompressedPageSize)
			}
			if values != cmd.NumValues || rows != rg.NumRows || chunkCompressed != cmd.TotalCompressedSize || chunkUncompressed != cmd.TotalUncompressedSize {
				t.Errorf("row group %d column %d: pages hold %d values of %d rows in %d/%d bytes; footer says %d values of %d rows in %d/%d bytes",
					g, col, values, rows, chunkCompressed, chunkUncompressed, cmd.NumValues, rg.NumRows, cmd.TotalCompressedSize, cmd.TotalUncompressedSize)
			}
			compressed += cmd.TotalCompressedSize
			uncompressed += cmd.TotalUncompressedSize
		}
		if compressed != rg.TotalCompressedSize || uncompressed != rg.TotalByteSize || rg.Ordinal != int16(g) {
			t.Errorf("row group %d: sizes %d/%d (ordinal %d), its chunks' %d/%d", g, rg.TotalCompressedSize, rg.TotalByteSize, rg.Ordinal, compressed, uncompressed)
		}
	}
	return pages
}

// TestValidateStatistics: validate reports a value outside its row group's
// statistics (readers filtering on them would skip its row), once per column
// and row group, and accepts the encoder's own bounds, truncated ones too.
func TestValidateStatistics(t *testing.T) {
	rows := encoderRows(40)
	for i := range rows {
		rows[i].ID = strings.Repeat("x", 100) + rows[i].ID // ids past the 64-byte stats limit
	}
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	tests := []struct {
		name   string
		edit   func(st *footerStatistics)
		col    int
		column string // the violation's field; "" for none
	}{
		{"the encoder's bounds", func(*footerStatistics) {}, colID, ""},
		{"string max below a value", func(st *footerStatistics) { st.MaxValue = []byte("x") }, colID, "id"},
		{"string min above a value", func(st *footerStatistics) { st.MinValue = []byte("zz") }, colTaskID, "task_id"},
		{"list element max below a value", func(st *footerStatistics) { st.MaxValue = []byte("a") }, colPromptRole, "prompt.list.element.role"},
		{"int64 min above a value", func(st *footerStatistics) { st.MinValue = le(1 << 40) }, colStep, "step"},
		{"double max below a value", func(st *footerStatistics) { st.MaxValue = le(math.Float64bits(-1)) }, colCompressionRatio, "compression_ratio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeEdited(t, rows, 13, func(g int, rg *encodedRowGroup) {
				if g == 1 {
					tt.edit(&rg.columns[tt.col].MetaData.Statistics)
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
			var got []Violation
			for _, v := range vs {
				if strings.Contains(v.Message, "statistics") {
					got = append(got, v)
				}
			}
			// encoderRows break value rules on purpose: only statistics count.
			if tt.column == "" {
				if len(got) != 0 {
					t.Errorf("statistics violations %v, want none", got)
				}
				return
			}
			// Row group 1 holds rows 14 to 26: one report, naming its first
			// row outside the bound.
			if len(got) != 1 || got[0].Field != tt.column || got[0].Row < 14 || got[0].Row > 26 {
				t.Errorf("statistics violations %v, want one for %s in rows 14-26", got, tt.column)
			}
		})
	}
}

// TestParquetEncoderChecksums checks that every page carries the CRC-32 of
// its body, so that a flipped bit in a page is an error naming the file
// instead of a different row that still reads (zstd frames carry no
// checksum, and levels and dictionary indices none at all).
func TestParquetEncoderChecksums(t *testing.T) {
	data := writeEncoded(t, encoderRows(60), 13)
	pages := filePages(t, data)
	for i, p := range pages {
		if got, want := uint32(p.header.CRC), crc32.ChecksumIEEE(p.body); got != want {
			t.Errorf("page %d (column %d at %d): crc %#08x, body's %#08x", i, p.column, p.offset, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), "flipped.parquet")
	for i, p := range pages {
		// One bit in the middle of the body: of the levels, the values or
		// a dictionary.
		flipped := bytes.Clone(data)
		flipped[p.offset+p.headerLen+int64(len(p.body)/2)] ^= 0x10
		if err := os.WriteFile(path, flipped, 0o644); err != nil {
			t.Fatal(err)
		}
		vs, err := ValidateFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(vs, func(v Violation) bool { return v.File == path && strings.Contains(v.Message, "checksum mismatch") }) {
			t.Errorf("page %d (column %s, %s): a flipped bit gave %v; want a checksum error naming the file", i, strings.Join(columnPaths()[p.column], "."), p.header.Type, vs)
		}
	}
}

// TestParquetEncoderZeroBounds checks the format's rule for zeros in
// floating-point statistics: a zero minimum is written -0.0 and a zero
// maximum +0.0, whatever the sign of the zeros in the column, so that a
// reader comparing by total order (Java's Double.compare) keeps the row
// group for either zero.
func TestParquetEncoderZeroBounds(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct {
		name     string
		ratios   []float64
		min, max float64
	}{
		{"negative zeros", []float64{negZero, negZero}, negZero, 0},
		{"positive zeros", []float64{0, 0}, negZero, 0},
		{"up to negative zero", []float64{-1, negZero}, -1, 0},
		{"from positive zero", []float64{0, 2}, negZero, 2},
		{"no zero", []float64{-2, 3}, -2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := encoderRows(len(tc.ratios))
			for i := range rows {
				rows[i].CompressionRatio = tc.ratios[i]
			}
			data := writeEncoded(t, rows, len(rows))
			pf := openFile(t, data)
			s := pf.Metadata().RowGroups[0].Columns[colCompressionRatio].MetaData.Statistics
			if len(s.MinValue) != 8 || len(s.MaxValue) != 8 {
				t.Fatalf("statistics %+v", s)
			}
			gotMin := math.Float64frombits(binary.LittleEndian.Uint64(s.MinValue))
			gotMax := math.Float64frombits(binary.LittleEndian.Uint64(s.MaxValue))
			if math.Float64bits(gotMin) != math.Float64bits(tc.min) || math.Float64bits(gotMax) != math.Float64bits(tc.max) {
				t.Errorf("bounds %v..%v (sign bits %t, %t), want %v..%v (%t, %t)", gotMin, gotMax,
					math.Signbit(gotMin), math.Signbit(gotMax), tc.min, tc.max, math.Signbit(tc.min), math.Signbit(tc.max))
			}
		})
	}
}

// TestValidateDamagedParquet checks that a damaged file is reported as
// damaged, naming the file, and never crashes the validator.
// testdata/damaged/reader-panic.parquet is an export written before pages
// had checksums with one bit flipped in a page's levels, which made
// parquet-go's reader panic.
func TestValidateDamagedParquet(t *testing.T) {
	rows := make([]Row, 6)
	for i := range rows {
		rows[i] = testRow(i, SplitTrain)
	}
	good := writeEncoded(t, rows, 2)
	panics, err := os.ReadFile("testdata/damaged/reader-panic.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pages := filePages(t, good)
	flipped := bytes.Clone(good)
	last := pages[len(pages)-1]
	flipped[last.offset+last.headerLen] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated footer", good[:len(good)-10], "not a readable Parquet file"},
		{"flipped bit in a page", flipped, "damaged file (write it again): row group"},
		{"reader panic", panics, "unreadable row: the Parquet reader failed"},
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

// TestParquetEncoderMatchesParquetGo is a property test: random rows written
// by the encoder and by parquet-go's own writer read back equal to what was
// written; the encoder's footer agrees with its pages; and its statistics
// are the bounds of each row group's values under the format's orders.
func TestParquetEncoderMatchesParquetGo(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			rows := randomRows(r, r.IntN(120), seed%4 == 3)
			groupRows := []int{1, 5, 64, 1000}[r.IntN(4)]

			ours := writeEncoded(t, rows, groupRows)
			var theirs bytes.Buffer
			w := parquet.NewGenericWriter[Row](&theirs, parquet.MaxRowsPerRowGroup(int64(groupRows)))
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for name, data := range map[string][]byte{"encoder": ours, "parquet-go writer": theirs.Bytes()} {
				got := readRows(t, data)
				if i := sameRows(got, rows); i >= 0 {
					if i >= len(got) || i >= len(rows) {
						t.Fatalf("%s: read %d rows, wrote %d", name, len(got), len(rows))
					}
					t.Fatalf("%s: row %d read back as\n%.500q\nwant\n%.500q", name, i, fmt.Sprintf("%+v", got[i]), fmt.Sprintf("%+v", rows[i]))
				}
			}
			filePages(t, ours)
			checkStatistics(t, ours, rows, groupRows)
		})
	}
}

// checkStatistics compares each column chunk's statistics with the bounds
// of its row group's values: unsigned bytewise order for strings, signed
// for integers, numeric for doubles with the format's rules (no bounds with
// a NaN; a zero minimum -0.0, a zero maximum +0.0); null count = rows with an empty list. String bounds over statsMaxBytes
// must be truncated: see checkStringBounds.
func checkStatistics(t *testing.T, data []byte, rows []Row, groupRows int) {
	t.Helper()
	pf := openFile(t, data)
	exact := footerExactness(t, data)
	field := func(ms []Message, f func(Message) string) (out [][]byte) {
		for _, m := range ms {
			out = append(out, []byte(f(m)))
		}
		return out
	}
	role := func(m Message) string { return m.Role }
	content := func(m Message) string { return m.Content }
	str := func(s string) [][]byte { return [][]byte{[]byte(s)} }
	i64 := func(v int64) [][]byte { return [][]byte{binary.LittleEndian.AppendUint64(nil, uint64(v))} }
	strs := map[int]func(*Row) [][]byte{
		colID:                func(r *Row) [][]byte { return str(r.ID) },
		colPromptRole:        func(r *Row) [][]byte { return field(r.Prompt, role) },
		colPromptContent:     func(r *Row) [][]byte { return field(r.Prompt, content) },
		colCompletionRole:    func(r *Row) [][]byte { return field(r.Completion, role) },
		colCompletionContent: func(r *Row) [][]byte { return field(r.Completion, content) },
		colKind:              func(r *Row) [][]byte { return str(r.Kind) },
		colSource:            func(r *Row) [][]byte { return str(r.Source) },
		colTaskID:            func(r *Row) [][]byte { return str(r.TaskID) },
		colGuidelineID:       func(r *Row) [][]byte { return str(r.GuidelineID) },
		colTeacherModel:      func(r *Row) [][]byte { return str(r.TeacherModel) },
		colSplit:             func(r *Row) [][]byte { return str(r.Split) },
	}
	ints := map[int]func(*Row) int64{
		colStep:         func(r *Row) int64 { return r.Step },
		colInputTokens:  func(r *Row) int64 { return r.InputTokens },
		colOutputTokens: func(r *Row) int64 { return r.OutputTokens },
	}
	for g, rg := range pf.Metadata().RowGroups {
		group := rows[g*groupRows : min((g+1)*groupRows, len(rows))]
		for col, c := range rg.Columns {
			var lo, hi []byte
			var nulls int64
			switch {
			case strs[col] != nil:
				for i := range group {
					for _, v := range strs[col](&group[i]) {
						if lo == nil || bytes.Compare(v, lo) < 0 {
							lo = v
						}
						if hi == nil || bytes.Compare(v, hi) > 0 {
							hi = v
						}
					}
				}
			case ints[col] != nil:
				x, y := ints[col](&group[0]), ints[col](&group[0])
				for i := range group {
					x, y = min(x, ints[col](&group[i])), max(y, ints[col](&group[i]))
				}
				lo, hi = i64(x)[0], i64(y)[0]
			case col == colCompressionRatio:
				x, y := math.Inf(1), math.Inf(-1)
				nan := false
				for _, r := range group {
					nan = nan || math.IsNaN(r.CompressionRatio)
					x, y = min(x, r.CompressionRatio), max(y, r.CompressionRatio)
				}
				if x == 0 {
					x = math.Copysign(0, -1)
				}
				if y == 0 {
					y = 0
				}
				if !nan {
					lo = binary.LittleEndian.AppendUint64(nil, math.Float64bits(x))
					hi = binary.LittleEndian.AppendUint64(nil, math.Float64bits(y))
				}
			}
			switch col {
			case colPromptRole, colPromptContent:
				nulls = int64(countEmpty(group, func(r Row) []Message { return r.Prompt }))
			case colCompletionRole, colCompletionContent:
				nulls = int64(countEmpty(group, func(r Row) []Message { return r.Completion }))
			}
			s := c.MetaData.Statistics
			where := fmt.Sprintf("row group %d, column %s", g, strings.Join(c.MetaData.PathInSchema, "."))
			if strs[col] != nil && lo != nil {
				checkStringBounds(t, where, s.MinValue, s.MaxValue, exact[g][col], lo, hi)
				lo, hi = s.MinValue, s.MaxValue // checked
			} else if lo != nil && exact[g][col] != [2]thrift.Null[bool]{thrift.New(true), thrift.New(true)} {
				t.Errorf("%s: exact bounds flagged %v", where, exact[g][col])
			}
			if !bytes.Equal(s.MinValue, lo) || !bytes.Equal(s.MaxValue, hi) || (lo == nil) != (s.MinValue == nil) || s.NullCount != nulls {
				t.Errorf("row group %d, column %s: statistics %.40q..%.40q, %d nulls; want %.40q..%.40q, %d nulls",
					g, strings.Join(c.MetaData.PathInSchema, "."), s.MinValue, s.MaxValue, s.NullCount, lo, hi, nulls)
			}
		}
	}
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
		if err := os.WriteFile(path, writeEncoded(t, rows, []int{1, 7, 64}[seed]), 0o644); err != nil {
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

// TestValidateDamagedPageHeaders checks that validate finds a page header
// whose sizes or counts disagree with its page, which the CRC does not
// cover and parquet-go's reader does not check but pyarrow rejects
// ("Corrupt ZSTD compressed data", "Index not in dictionary bounds").
func TestValidateDamagedPageHeaders(t *testing.T) {
	rows := make([]Row, 6)
	for i := range rows {
		rows[i] = testRow(i, SplitTrain)
	}
	data := writeEncoded(t, rows, 3)
	path := filepath.Join(t.TempDir(), "train.parquet")
	for i, p := range filePages(t, data) {
		edits := map[string]func(h *format.PageHeader, d int32){
			"uncompressed size": func(h *format.PageHeader, d int32) { h.UncompressedPageSize += d },
		}
		if p.header.Type == format.DictionaryPage {
			edits["dictionary size"] = func(h *format.PageHeader, d int32) { h.DictionaryPageHeader.V.NumValues += d }
		}
		for name, edit := range edits {
			// An edit that keeps the header's length keeps every offset.
			var header []byte
			for _, d := range []int32{1, -1} {
				h := p.header
				edit(&h, d)
				b, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(b)) == p.headerLen {
					header = b
					break
				}
			}
			if header == nil {
				continue
			}
			damaged := slices.Concat(data[:p.offset], header, data[p.offset+p.headerLen:])
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			vs, err := ValidateFile(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(vs, func(v Violation) bool { return strings.Contains(v.Message, "damaged file") }) {
				t.Errorf("page %d (column %s, %s) with a wrong %s: violations %v; want the file reported damaged",
					i, strings.Join(columnPaths()[p.column], "."), p.header.Type, name, vs)
			}
		}
	}
}
