package distill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMessagesFormat: the prompt then the completion, which alone carries
// weight 1; the prompt's messages carry weight null, so that every message
// has the same keys and schema-inferring readers see one struct type.
func TestMessagesFormat(t *testing.T) {
	r := testRow(1, SplitTrain)
	r.Prompt[1].Content = "<x> & y"
	got := writeFormat(t, messagesFormat{}, WriterOptions{}, r)
	want := `{"messages":[{"role":"system","content":"Compress the history.","weight":null},` +
		`{"role":"user","content":"<x> & y","weight":null},{"role":"assistant","content":"Summary 1.","weight":1}]}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if vs := validateString(t, "train.messages.jsonl", got); len(vs) != 0 {
		t.Errorf("the line does not validate: %v", vs)
	}
	if strings.Count(got, "\n") != 1 {
		t.Errorf("want one line")
	}
}

// validateString validates text as a file of the given name.
func validateString(t *testing.T, name, text string) []Violation {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	vs, err := ValidateFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}
