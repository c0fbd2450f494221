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
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// encoderRows are rows that reach every path of the encoder: texts long
// enough to fill several pages in one row group, empty lists and strings,
// one-entry dictionaries (bit width 0), dictionaries of hundreds of entries,
// non-ASCII text and extreme numbers.
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
			size = 300 << 10 // three of these fill a page
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
	var b bytes.Buffer
	f, err := newParquetFile(&b, SplitTrain)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(rows); start += groupRows {
		rg, err := encodeRowGroup(rows[start:min(start+groupRows, len(rows))])
		if err != nil {
			t.Fatal(err)
		}
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
			pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
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
			if s := first[colPromptContent].MetaData.Statistics; s.MinValue != nil || s.MaxValue != nil {
				t.Errorf("texts got bounds: %d and %d bytes", len(s.MinValue), len(s.MaxValue))
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
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
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
		if p.Size() > pageBufferSize+(310<<10) {
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
	node, check := duckdbCheck(t)
	rows := encoderRows(60)
	path := filepath.Join(t.TempDir(), "rows.parquet")
	if err := os.WriteFile(path, writeEncoded(t, rows, 13), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, check, "--rows", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb-check: %v\n%s", err, stderr.String())
	}
	var report struct {
		Files []struct {
			RowsJSON []string `json:"rows_json"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("duckdb-check output: %v", err)
	}
	if len(report.Files) != 1 || len(report.Files[0].RowsJSON) != len(rows) {
		t.Fatalf("DuckDB read %+v rows, want %d", len(report.Files), len(rows))
	}
	for i, line := range report.Files[0].RowsJSON {
		var got Row
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if want := normalized(rows[i : i+1])[0]; !reflect.DeepEqual(normalized([]Row{got})[0], want) {
			t.Fatalf("DuckDB read row %d as\n%.300s\nwant\n%+.300v", i, line, want)
		}
	}
}

// filePages walks every page of an encoded file by its headers, and checks
// that the footer's offsets, sizes and counts agree with the pages.
func filePages(t *testing.T, data []byte) []parquetPage {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	md := pf.Metadata()
	var pages []parquetPage
	if err := parquetPages(bytes.NewReader(data), md, func(p parquetPage) error {
		p.body = bytes.Clone(p.body)
		pages = append(pages, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for g, rg := range md.RowGroups {
		var compressed, uncompressed int64
		for col, c := range rg.Columns {
			cmd := c.MetaData
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
		if compressed != rg.TotalCompressedSize || uncompressed != rg.TotalByteSize || int(rg.Ordinal) != g {
			t.Errorf("row group %d: sizes %d/%d (ordinal %d), its chunks' %d/%d", g, rg.TotalCompressedSize, rg.TotalByteSize, rg.Ordinal, compressed, uncompressed)
		}
	}
	return pages
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
			pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
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
