package distill

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// goldenRows decodes testdata/golden/SPLIT.jsonl: the rows the fixture's
// export holds, which every data file must hold too.
func goldenRows(t *testing.T, split string) []Row {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", split+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []Row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestParquetRowsMatchGolden compares the rows, not the bytes, of the
// fixture export's Parquet files with the golden rows, as parquet-go and
// (when installed) DuckDB read them: whatever writes the Parquet, readers
// must find the same rows.
func TestParquetRowsMatchGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dataset")
	if _, err := Build(t.Context(), "testdata/run", out, Options{RowGroupRows: 2}); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var want [][]Row
	for _, split := range splitNames {
		path := filepath.Join(out, "data", split+".parquet")
		rows, err := parquet.ReadFile[Row](path)
		if err != nil {
			t.Fatal(err)
		}
		golden := goldenRows(t, split)
		if len(golden) == 0 || !reflect.DeepEqual(rows, golden) {
			t.Errorf("%s: parquet-go reads %d rows, want the %d golden rows:\n got %.400s\nwant %.400s", split, len(rows), len(golden), fmt.Sprint(rows), fmt.Sprint(golden))
		}
		paths, want = append(paths, path), append(want, golden)
	}
	t.Run("duckdb", func(t *testing.T) {
		for i, got := range duckdbRows(t, paths...) {
			if !reflect.DeepEqual(got, want[i]) {
				t.Errorf("%s: DuckDB reads %d rows, want the %d golden rows", paths[i], len(got), len(want[i]))
			}
		}
	})
}
