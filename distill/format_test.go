package distill

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idsFormat is a format defined only here: one id a line.
type idsFormat struct{}

func (idsFormat) Path(split string) string { return split + ".ids.txt" }

func (idsFormat) Open(w io.Writer, _ string, _ WriterOptions) (RowWriter, error) {
	return idsWriter{w}, nil
}

type idsWriter struct{ w io.Writer }

func (i idsWriter) Write(r *Row) error {
	_, err := fmt.Fprintln(i.w, r.ID)
	return err
}

func (idsWriter) Close() error { return nil }

// TestRegisterFormat: a format registered by a file of its own is written
// by every build and listed by the card, with no other change.
func TestRegisterFormat(t *testing.T) {
	RegisterFormat(FormatInfo{Name: "ids", Description: "the row ids", Order: 9, Format: idsFormat{}})
	t.Cleanup(func() {
		formats.Lock()
		delete(formats.m, "ids")
		formats.Unlock()
	})
	out := filepath.Join(t.TempDir(), "ds")
	m, err := Build(t.Context(), "testdata/run", out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := os.ReadFile(filepath.Join(out, "train.ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ids), "\n"); n != m.Splits[SplitTrain].Rows {
		t.Errorf("train.ids.txt has %d ids, the split %d rows", n, m.Splits[SplitTrain].Rows)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(card), "| `train.ids.txt` | the row ids |") {
		t.Errorf("the card does not list the registered format's files")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second format named ids was registered")
		}
	}()
	RegisterFormat(FormatInfo{Name: "ids", Format: idsFormat{}})
}
