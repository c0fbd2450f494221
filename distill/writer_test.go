package distill

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ctxopt/ctxopt/compress"
)

func testRow(i int, split string) Row {
	return Row{
		ID: fmt.Sprintf("%032x", i),
		Prompt: []Message{
			{Role: "system", Content: "Compress the history."},
			{Role: "user", Content: fmt.Sprintf("History %d: %s", i, strings.Repeat("the agent searched and found ", i%7+1))},
		},
		Completion:       []Message{{Role: "assistant", Content: fmt.Sprintf("Summary %d.", i)}},
		Kind:             []string{compress.KindHistory, compress.KindObservation, KindPlanAware}[i%3],
		Source:           SourceACON,
		TaskID:           fmt.Sprintf("task-%02d", i/4),
		Step:             int64(i % 9),
		GuidelineID:      "g-1",
		TeacherModel:     "teacher",
		InputTokens:      int64(40 + i),
		OutputTokens:     int64(4 + i%3),
		CompressionRatio: 0.1,
		Split:            split,
	}
}

// writeTestRows writes n rows, every fourth task to validation.
func writeTestRows(t *testing.T, dir string, n int, opts WriterOptions) WriterStats {
	t.Helper()
	w, err := NewWriter(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		split := SplitTrain
		if (i/4)%4 == 3 {
			split = SplitValidation
		}
		if err := w.Write(testRow(i, split)); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

func openParquet(t *testing.T, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pf
}

const messageListSchema = `group %s (LIST) {
	repeated group list {
		required group element {
			required binary role (STRING);
			required binary content (STRING);
		}
	}
}`

func TestWriterParquetLayout(t *testing.T) {
	dir := t.TempDir()
	const rowGroupRows = 7
	writeTestRows(t, dir, 50, WriterOptions{RowGroupRows: rowGroupRows})
	for _, split := range splitNames {
		t.Run(split, func(t *testing.T) {
			pf := openParquet(t, filepath.Join(dir, parquetFormat{}.Path(split)))
			var b strings.Builder
			if err := parquet.PrintSchema(&b, "row", pf.Schema()); err != nil {
				t.Fatal(err)
			}
			schema := strings.Join(strings.Fields(b.String()), " ")
			for _, name := range []string{"prompt", "completion"} {
				want := "required " + fmt.Sprintf(messageListSchema, name)
				if !strings.Contains(schema, strings.Join(strings.Fields(want), " ")) {
					t.Errorf("schema has no %s of the standard LIST layout:\n%s\nwant a column:\n%s", name, b.String(), want)
				}
			}
			if len(pf.RowGroups()) < 2 {
				t.Errorf("%d row groups: want the rows spread over several", len(pf.RowGroups()))
			}
			for i, rg := range pf.Metadata().RowGroups {
				if rg.NumRows > rowGroupRows {
					t.Errorf("row group %d has %d rows, bound is %d", i, rg.NumRows, rowGroupRows)
				}
				for _, cc := range rg.Columns {
					col := strings.Join(cc.MetaData.PathInSchema, ".")
					if cc.MetaData.Codec != format.Zstd {
						t.Errorf("row group %d column %s: codec %s, want ZSTD", i, col, cc.MetaData.Codec)
					}
					for _, e := range cc.MetaData.Encoding {
						if e == format.DeltaLengthByteArray || e == format.DeltaByteArray {
							t.Errorf("column %s uses %s", col, e)
						}
					}
				}
			}
		})
	}
}

func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	stats := writeTestRows(t, dir, 40, WriterOptions{RowGroupRows: 5})
	var want []Row
	for i := range 40 {
		if (i/4)%4 != 3 {
			want = append(want, testRow(i, SplitTrain))
		}
	}
	if stats.Splits[SplitTrain].Rows != len(want) || stats.Rows() != 40 {
		t.Fatalf("stats %+v, want %d train rows of 40", stats, len(want))
	}
	r := parquet.NewGenericReader[Row](openParquet(t, filepath.Join(dir, parquetFormat{}.Path(SplitTrain))))
	got := make([]Row, 100)
	n, _ := r.Read(got)
	if n != len(want) {
		t.Fatalf("read %d parquet rows, want %d", n, len(want))
	}
	lines := readLines(t, filepath.Join(dir, jsonlFormat{}.Path(SplitTrain)))
	msgs := readLines(t, filepath.Join(dir, messagesFormat{}.Path(SplitTrain)))
	for i := range want {
		if !rowsEqual(got[i], want[i]) {
			t.Errorf("parquet row %d = %+v, want %+v", i, got[i], want[i])
		}
		var fromJSON Row
		if err := json.Unmarshal(lines[i], &fromJSON); err != nil || !rowsEqual(fromJSON, want[i]) {
			t.Errorf("jsonl row %d = %+v (%v), want %+v", i, fromJSON, err, want[i])
		}
		var m struct {
			Messages []Message `json:"messages"`
		}
		if err := json.Unmarshal(msgs[i], &m); err != nil || len(m.Messages) != 3 || m.Messages[2].Content != want[i].Completion[0].Content {
			t.Errorf("messages row %d = %s (%v)", i, msgs[i], err)
		}
	}
}

// TestWriterFormats: an export of the Parquet format alone writes the same
// Parquet bytes as a full export and no other file; an unknown format is
// refused with the registered ones.
func TestWriterFormats(t *testing.T) {
	if _, err := NewWriter(t.TempDir(), WriterOptions{Formats: []string{"csv"}}); err == nil || !strings.Contains(err.Error(), "jsonl, messages") {
		t.Errorf("NewWriter with format csv: %v, want an error listing the formats", err)
	}
	full, only := t.TempDir(), t.TempDir()
	writeTestRows(t, full, 30, WriterOptions{RowGroupRows: 4})
	writeTestRows(t, only, 30, WriterOptions{RowGroupRows: 4, Formats: []string{"parquet"}})
	want, err := listFiles(full)
	if err != nil {
		t.Fatal(err)
	}
	got, err := listFiles(only)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, f := range got {
		sums[f.Path] = f.SHA256
	}
	parquetFiles := 0
	for _, f := range want {
		sum, ok := sums[f.Path]
		switch {
		case filepath.Ext(f.Path) == ".parquet":
			parquetFiles++
			if sum != f.SHA256 {
				t.Errorf("%s differs from the full export's", f.Path)
			}
		case ok:
			t.Errorf("Parquet-only export wrote %s", f.Path)
		}
	}
	if parquetFiles == 0 || len(got) != parquetFiles {
		t.Fatalf("Parquet-only export wrote %d files, want the %d Parquet files", len(got), parquetFiles)
	}
}

// TestWriterRejectsMalformedRows writes good rows around a malformed one:
// Write names the fault, and the files are byte for byte those of the good
// rows alone, also after a row larger than a page.
func TestWriterRejectsMalformedRows(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Row)
		want   string
	}{
		{"unknown split", func(r *Row) { r.Split = "test" }, "unknown split"},
		{"bad role", func(r *Row) { r.Prompt[0].Role = "tool" }, "prompt[0].role"},
		{"empty content", func(r *Row) { r.Prompt[1].Content = " " }, "prompt[1].content"},
		{"no completion", func(r *Row) { r.Completion = nil }, "completion"},
		{"completion by user", func(r *Row) { r.Completion[0].Role = "user" }, "completion[0].role"},
		{"bad kind", func(r *Row) { r.Kind = "summary" }, "kind"},
		{"invalid utf-8", func(r *Row) { r.Completion[0].Content = "a\xffb" }, "completion[0].content: not valid UTF-8"},
		{"invalid utf-8 in the prompt", func(r *Row) { r.Prompt[1].Content = "\xc3(" }, "prompt[1].content: not valid UTF-8"},
	}
	large := testRow(11, SplitTrain)
	large.Prompt[1].Content = strings.Repeat("a long history ", (1<<20)/15+1)
	write := func(t *testing.T, dir string, bad *Row, want string) {
		t.Helper()
		w, err := NewWriter(dir, WriterOptions{RowGroupRows: 3})
		if err != nil {
			t.Fatal(err)
		}
		rows := []Row{testRow(10, SplitTrain), large}
		if bad != nil {
			rows = append(rows, *bad)
		}
		for _, r := range append(rows, testRow(12, SplitTrain), testRow(13, SplitTrain)) {
			err := w.Write(r)
			switch {
			case bad != nil && r.ID == bad.ID:
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Write = %v, want an error about %s", err, want)
				}
			case err != nil:
				t.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ref := t.TempDir()
	write(t, ref, nil, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := testRow(1, SplitTrain)
			tt.change(&bad)
			dir := t.TempDir()
			write(t, dir, &bad, tt.want)
			sameDataFiles(t, dir, ref, "from the good rows' alone")
		})
	}
}

// sameDataFiles fails t unless the data files of dataset directories got
// and want are the same, byte for byte.
func sameDataFiles(t *testing.T, got, want, why string) {
	t.Helper()
	for _, split := range splitNames {
		for _, name := range []string{jsonlFormat{}.Path(split), messagesFormat{}.Path(split), parquetFormat{}.Path(split)} {
			g, err := os.ReadFile(filepath.Join(got, name))
			if err != nil {
				t.Fatal(err)
			}
			w, err := os.ReadFile(filepath.Join(want, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(g, w) {
				t.Errorf("%s differs %s", name, why)
			}
		}
	}
}

// duckdbCheck returns node and the repository's DuckDB check script
// (scripts/duckdb-check.mjs), skipping the test when
// scripts/install-test-tools.sh has not installed DuckDB, and failing it when
// CTXOPT_REQUIRE_DUCKDB=1 says it must be there.
func duckdbCheck(t *testing.T) (node, script string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(root, ".cache/node/node_modules/@duckdb/node-api"))
	node, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		msg := "DuckDB (node and .cache/node/node_modules/@duckdb/node-api) not installed; run scripts/install-test-tools.sh"
		if os.Getenv("CTXOPT_REQUIRE_DUCKDB") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, filepath.Join(root, "scripts/duckdb-check.mjs")
}

// runDuckDBCheck runs scripts/duckdb-check.mjs with args and returns what it
// printed.
func runDuckDBCheck(t *testing.T, args ...string) []byte {
	t.Helper()
	node, check := duckdbCheck(t)
	cmd := exec.CommandContext(t.Context(), node, append([]string{check}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb-check: %v\n%s", err, stderr.String())
	}
	return out
}

// TestDuckDBReadsParquet reads the files with DuckDB, an independent
// implementation; scripts/install-test-tools.sh installs it.
func TestDuckDBReadsParquet(t *testing.T) {
	duckdbCheck(t) // skips before the build when DuckDB is missing
	dir := t.TempDir()
	if _, err := Build(t.Context(), "testdata/run", dir, Options{RowGroupRows: 2}); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, split := range splitNames {
		paths = append(paths, filepath.Join(dir, parquetFormat{}.Path(split)))
	}
	out := runDuckDBCheck(t, paths...)
	var report struct {
		Files []struct {
			Path    string `json:"path"`
			Rows    int    `json:"rows"`
			Columns []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"columns"`
			MaxRowGroupRows int      `json:"max_row_group_rows"`
			Codecs          []string `json:"codecs"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("duckdb-check output: %v\n%s", err, out)
	}
	const messageList = `STRUCT("role" VARCHAR, "content" VARCHAR)[]`
	for i, f := range report.Files {
		split := splitNames[i]
		if want := len(readLines(t, filepath.Join(dir, jsonlFormat{}.Path(split)))); f.Rows != want || want == 0 {
			t.Errorf("%s: DuckDB read %d rows, %s has %d", split, f.Rows, jsonlFormat{}.Path(split), want)
		}
		types := map[string]string{}
		for _, c := range f.Columns {
			types[c.Name] = c.Type
		}
		for _, col := range []string{"prompt", "completion"} {
			if types[col] != messageList {
				t.Errorf("%s: DuckDB sees %s as %s, want %s", split, col, types[col], messageList)
			}
		}
		if types["input_tokens"] != "BIGINT" || types["compression_ratio"] != "DOUBLE" || types["task_id"] != "VARCHAR" {
			t.Errorf("%s: metadata types %v", split, types)
		}
		if f.MaxRowGroupRows > 2 {
			t.Errorf("%s: row groups of %d rows, bound is 2", split, f.MaxRowGroupRows)
		}
		if strings.Join(f.Codecs, ",") != "ZSTD" {
			t.Errorf("%s: codecs %v, want ZSTD", split, f.Codecs)
		}
	}
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func rowsEqual(a, b Row) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
