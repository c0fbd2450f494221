package distill

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// writeFormat writes rows as a train split through a format and returns
// its bytes.
func writeFormat(t *testing.T, f Format, opts WriterOptions, rows ...Row) string {
	t.Helper()
	var b bytes.Buffer
	w, err := f.Open(&b, SplitTrain, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestJSONLFormat: a line a row, in Row's field order, that decodes to the
// row; HTML characters are kept as written (trainers read the teacher's
// text), while characters JSON must escape are escaped.
func TestJSONLFormat(t *testing.T) {
	r := testRow(3, SplitTrain)
	r.Completion[0].Content = "<b>a & b</b>\u2028\"q\"\n"
	got := writeFormat(t, jsonlFormat{}, WriterOptions{}, r, testRow(4, SplitTrain))
	lines := strings.SplitAfter(got, "\n")
	if len(lines) != 3 || lines[2] != "" {
		t.Fatalf("want two lines, got %q", got)
	}
	if !strings.HasPrefix(lines[0], `{"id":"`) || !strings.Contains(lines[0], `"content":"<b>a & b</b>\u2028\"q\"\n"`) {
		t.Errorf("line %s: want id first and the text unescaped but for JSON's escapes", lines[0])
	}
	var back Row
	if err := json.Unmarshal([]byte(lines[0]), &back); err != nil || !rowsEqual(back, r) {
		t.Errorf("line decodes to %+v (%v), want %+v", back, err, r)
	}
}
