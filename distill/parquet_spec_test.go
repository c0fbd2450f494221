package distill

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
)

// textBytes is the size the Writer tracks for a batch of rows.
func textBytes(rows []Row) int {
	n := 0
	for i := range rows {
		n += rowBytes(&rows[i])
	}
	return n
}

// encodeRows encodes rows as one row group, as the Writer does.
func encodeRows(t *testing.T, rows []Row) (*encodedRowGroup, error) {
	t.Helper()
	p := newEncoderPool(1)
	texts := p.newMessageTexts()
	for i := range rows {
		if err := texts.add(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	return p.encode(rows, texts, textBytes(rows))
}

// testFooter is the part of a footer that parquet-go's format types do not
// decode: the exactness flags of statistics.
type testFooter struct {
	RowGroups []struct {
		Columns []struct {
			MetaData struct {
				Statistics struct {
					IsMaxValueExact thrift.Null[bool] `thrift:"7,optional"`
					IsMinValueExact thrift.Null[bool] `thrift:"8,optional"`
				} `thrift:"12,optional"`
			} `thrift:"3,optional"`
		} `thrift:"1,required"`
	} `thrift:"4,required"`
}

func decodeFooter(t *testing.T, data []byte) testFooter {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	var f testFooter
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-n:len(data)-8], &f); err != nil {
		t.Fatalf("decode footer: %v", err)
	}
	return f
}

// footerExactness returns, per row group and column, whether the minimum
// and the maximum are flagged exact.
func footerExactness(t *testing.T, data []byte) [][][2]thrift.Null[bool] {
	t.Helper()
	f := decodeFooter(t, data)
	out := make([][][2]thrift.Null[bool], len(f.RowGroups))
	for g, rg := range f.RowGroups {
		for _, c := range rg.Columns {
			s := c.MetaData.Statistics
			out[g] = append(out[g], [2]thrift.Null[bool]{s.IsMinValueExact, s.IsMaxValueExact})
		}
	}
	return out
}

// checkStringBounds checks a string chunk's bounds against the true bounds
// lo and hi of its values: each is the value itself, flagged exact, when it
// fits in statsMaxBytes; otherwise valid UTF-8 of at most statsMaxBytes,
// flagged inexact, a prefix of lo for the minimum, and greater than hi for
// the maximum (or no maximum at all, only when hi's prefix is all U+10FFFF).
// So min <= every value <= max in the format's bytewise order.
func checkStringBounds(t *testing.T, where string, gotMin, gotMax []byte, exact [2]thrift.Null[bool], lo, hi []byte) {
	t.Helper()
	if len(lo) <= statsMaxBytes {
		if !bytes.Equal(gotMin, lo) || exact[0] != thrift.New(true) {
			t.Errorf("%s: min %.100q (exact %v), want %.100q exact", where, gotMin, exact[0], lo)
		}
	} else if !bytes.HasPrefix(lo, gotMin) || len(gotMin) > statsMaxBytes || len(gotMin) < statsMaxBytes-3 ||
		!utf8.Valid(gotMin) || exact[0] != thrift.New(false) {
		t.Errorf("%s: min %.100q (%d bytes, exact %v) of %.100q: want a valid UTF-8 prefix of %d-%d bytes, inexact",
			where, gotMin, len(gotMin), exact[0], lo, statsMaxBytes-3, statsMaxBytes)
	}
	switch {
	case len(hi) <= statsMaxBytes:
		if !bytes.Equal(gotMax, hi) || exact[1] != thrift.New(true) {
			t.Errorf("%s: max %.100q (exact %v), want %.100q exact", where, gotMax, exact[1], hi)
		}
	case gotMax == nil:
		if strings.Trim(string(hi[:runeCut(string(hi), statsMaxBytes)]), "\U0010FFFF") != "" || exact[1].Valid {
			t.Errorf("%s: no max for %.100q, which has an upper bound", where, hi)
		}
	case bytes.Compare(gotMax, hi) <= 0 || len(gotMax) > statsMaxBytes || !utf8.Valid(gotMax) || exact[1] != thrift.New(false):
		t.Errorf("%s: max %.100q (%d bytes, exact %v) of %.100q: want valid UTF-8 over it, at most %d bytes, inexact",
			where, gotMax, len(gotMax), exact[1], hi, statsMaxBytes)
	}
}

// TestStringBounds checks truncated string statistics at the edges of
// UTF-8: characters cut at the limit, increments that lengthen a character
// or cross the surrogates, U+10FFFF that cannot be incremented; then, as a
// property, min <= every value <= max over random sets of strings.
func TestStringBounds(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name, value string
		min, max    string
		noMax       bool
	}{
		{"at the limit", a(64), a(64), a(64), false},
		{"one over", a(65), a(64), a(63) + "b", false},
		{"two-byte character across the limit", a(63) + "é" + a(10), a(63), a(62) + "b", false},
		{"four-byte character across the limit", a(62) + "😀" + a(10), a(62), a(61) + "b", false},
		{"increment lengthens a character past the limit", a(63) + "\x7f" + a(10), a(63) + "\x7f", a(62) + "b", false},
		{"increment lengthens a character within the limit", a(62) + "\x7f" + strings.Repeat("\U0010FFFF", 3), a(62) + "\x7f", a(62) + "\u0080", false},
		{"past the surrogates", a(61) + "\ud7ff" + a(10), a(61) + "\ud7ff", a(61) + "\ue000", false},
		{"largest character skipped", "a" + strings.Repeat("\U0010FFFF", 20), "a" + strings.Repeat("\U0010FFFF", 15), "b", false},
		{"no upper bound", strings.Repeat("\U0010FFFF", 20), strings.Repeat("\U0010FFFF", 16), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s footerStatistics
			m := minMax[string]{}
			m.add(tc.value)
			stringBounds(&s, &m)
			if string(s.MinValue) != tc.min || string(s.MaxValue) != tc.max || (s.MaxValue == nil) != tc.noMax {
				t.Errorf("bounds %q..%q (no max %t), want %q..%q (%t)", s.MinValue, s.MaxValue, s.MaxValue == nil, tc.min, tc.max, tc.noMax)
			}
			exact := len(tc.value) <= statsMaxBytes
			if s.IsMinValueExact != thrift.New(exact) || !tc.noMax && s.IsMaxValueExact != thrift.New(exact) {
				t.Errorf("exact flags %v, %v; want %t", s.IsMinValueExact, s.IsMaxValueExact, exact)
			}
		})
	}

	// Characters of every UTF-8 length and the ones at the edges of the
	// increment, in strings around the limit that share long prefixes.
	edges := []rune{'a', 'b', 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, utf8.MaxRune, 'é', '😀'}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0xb0))
		prefix := func() string {
			var b strings.Builder
			for b.Len() < 40+r.IntN(40) {
				b.WriteRune(edges[r.IntN(len(edges))])
			}
			return b.String()
		}
		common := prefix()
		values := make([]string, 1+r.IntN(6))
		for i := range values {
			values[i] = common[:runeCut(common+"\x00", r.IntN(len(common)+1))] + prefix()
		}
		var m minMax[string]
		for _, v := range values {
			m.add(v)
		}
		var s footerStatistics
		stringBounds(&s, &m)
		where := fmt.Sprintf("seed %d", seed)
		checkStringBounds(t, where, s.MinValue, s.MaxValue, [2]thrift.Null[bool]{s.IsMinValueExact, s.IsMaxValueExact}, []byte(m.min), []byte(m.max))
		for _, v := range values {
			if string(s.MinValue) > v || s.MaxValue != nil && string(s.MaxValue) < v {
				t.Errorf("%s: bounds %q..%q do not hold %q", where, s.MinValue, s.MaxValue, v)
			}
		}
	}
}

// longIDRows are rows whose identifiers share a prefix longer than
// statsMaxBytes and differ after it, with non-ASCII at the cut.
func longIDRows(n int) []Row {
	rows := make([]Row, n)
	prefix := strings.Repeat("ä", 40) // 80 bytes
	for i := range rows {
		rows[i] = testRow(i, SplitTrain)
		rows[i].ID = fmt.Sprintf("%s-%03d-%s", prefix, i, strings.Repeat("é", 3000))
		rows[i].TaskID = rows[i].ID
	}
	return rows
}

// TestParquetEncoderTruncatesStringStatistics checks that a long string
// costs the footer at most statsMaxBytes per bound, that the readers see
// the truncated bounds as such, and that DuckDB's row-group pruning by them
// still finds every row.
func TestParquetEncoderTruncatesStringStatistics(t *testing.T) {
	rows := longIDRows(12)
	data := writeEncoded(t, rows, 3)
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	if perGroup := n / 4; perGroup > 4<<10 {
		t.Errorf("footer of %d bytes for 4 row groups: the 6 KB strings reached it", n)
	}
	filePages(t, data)
	checkStatistics(t, data, rows, 3)

	path := filepath.Join(t.TempDir(), "long.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--stats"}
	for _, r := range rows {
		args = append(args, "--count-where", "id = '"+r.ID+"'", "--count-where", "task_id = '"+r.TaskID+"'")
	}
	var report struct {
		Files []struct {
			Stats []struct {
				RowGroup   int    `json:"row_group"`
				Path       string `json:"path"`
				FileOffset int64  `json:"file_offset"`
				Min        string `json:"min"`
				Max        string `json:"max"`
				MinExact   bool   `json:"min_is_exact"`
				MaxExact   bool   `json:"max_is_exact"`
			} `json:"stats"`
			Counts []int `json:"counts"`
		} `json:"files"`
	}
	if err := json.Unmarshal(runDuckDBCheck(t, append(args, path)...), &report); err != nil {
		t.Fatal(err)
	}
	f := report.Files[0]
	for i, c := range f.Counts {
		if c != 1 {
			t.Errorf("DuckDB: %d rows where %s, want 1", c, args[2+2*i][:40])
		}
	}
	seen, offsets := 0, 0
	for _, s := range f.Stats {
		if s.FileOffset != 0 {
			offsets++
		}
		if s.Path != "id" && s.Path != "task_id" {
			continue
		}
		seen++
		group := rows[3*s.RowGroup : 3*s.RowGroup+3]
		if len(s.Min) > statsMaxBytes || len(s.Max) > statsMaxBytes || s.MinExact || s.MaxExact ||
			s.Min > group[0].ID || s.Max <= group[2].ID {
			t.Errorf("DuckDB reads row group %d %s's bounds as %q..%q (exact %t, %t); want inexact bounds of at most %d bytes around %.90q..%.90q",
				s.RowGroup, s.Path, s.Min, s.Max, s.MinExact, s.MaxExact, statsMaxBytes, group[0].ID, group[2].ID)
		}
	}
	if offsets > 0 {
		t.Errorf("DuckDB reads a file_offset other than 0 in %d column chunks of %d", offsets, len(f.Stats))
	}
	if seen != 8 {
		t.Errorf("DuckDB listed %d id and task_id chunks, want 8", seen)
	}
}

// TestParquetEncoderManyRowGroups writes more row groups than an i16
// ordinal numbers: the footer leaves every ordinal out (optional in the
// format), and parquet-go and DuckDB read the file. The row groups are
// copies of one encoded row group, which keeps the test fast.
func TestParquetEncoderManyRowGroups(t *testing.T) {
	const n = 1<<15 + 2
	rows := []Row{{ID: "x", Prompt: []Message{{Role: "user", Content: "q"}}, Completion: []Message{{Role: "assistant", Content: "a"}},
		Kind: KindPlanAware, Source: SourceACON, Split: SplitTrain}}
	var b bytes.Buffer
	f, err := newParquetFile(&b, SplitTrain)
	if err != nil {
		t.Fatal(err)
	}
	one, err := encodeRows(t, rows)
	if err != nil {
		t.Fatal(err)
	}
	encoded := bytes.Clone(one.data)
	for range n {
		rg := *one
		rg.data, rg.buf = bytes.Clone(encoded), new([]byte)
		if err := f.commit(&rg); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	pf := openFile(t, data)
	groups := pf.RowGroups()
	if len(groups) != n {
		t.Fatalf("parquet-go opens %d row groups of %d", len(groups), n)
	}
	var footer struct {
		RowGroups []struct {
			Ordinal thrift.Null[int16] `thrift:"7,optional"`
		} `thrift:"4,required"`
	}
	size := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-size:len(data)-8], &footer); err != nil {
		t.Fatal(err)
	}
	for g, rg := range footer.RowGroups {
		if rg.Ordinal.Valid {
			t.Fatalf("row group %d has ordinal %d in a file of %d row groups", g, rg.Ordinal.V, n)
		}
	}
	for _, g := range []int{0, 1<<15 - 1, 1 << 15, n - 1} {
		got := make([]Row, 2)
		r := parquet.NewGenericRowGroupReader[Row](groups[g])
		if read, _ := r.Read(got); read != 1 || sameRows(got[:1], rows) >= 0 {
			t.Errorf("row group %d: parquet-go reads %d rows: %+v", g, read, got[0])
		}
	}

	path := filepath.Join(t.TempDir(), "many.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var report struct {
		Files []struct {
			Rows      int `json:"rows"`
			RowGroups int `json:"row_groups"`
		} `json:"files"`
	}
	if err := json.Unmarshal(runDuckDBCheck(t, path), &report); err != nil {
		t.Fatal(err)
	}
	if f := report.Files[0]; f.Rows != n || f.RowGroups != n {
		t.Errorf("DuckDB reads %d rows in %d row groups, want %d", f.Rows, f.RowGroups, n)
	}
}
