package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenResumed resumes from the files a killed run can leave, and
// damaged ones, by the rule every JSONL reader follows (jsonl.Torn).
func TestOpenResumed(t *testing.T) {
	tests := []struct {
		name, file string
		// read are the ids read; after, the file once "{}\n" is appended
		// (the file itself on an error); torn, the line cut off with a
		// warning; wantErr, the error.
		read    []string
		after   string
		torn    int
		wantErr string
	}{
		{name: "empty file", file: "", after: "{}\n"},
		{name: "complete", file: `{"id":"a"}` + "\n", read: []string{"a"}, after: `{"id":"a"}` + "\n{}\n"},
		{name: "torn last line", file: `{"id":"a"}` + "\n" + `{"id":"b`, read: []string{"a"}, after: `{"id":"a"}` + "\n{}\n", torn: 2},
		{name: "last line without its newline", file: `{"id":"a"}` + "\n" + `{"id":"b"}`, read: []string{"a", "b"}, after: `{"id":"a"}` + "\n" + `{"id":"b"}` + "\n{}\n"},
		{name: "damaged line in the middle", file: `{"id":"a"}` + "\n" + `{"id":` + "\n" + `{"id":"c"}` + "\n", after: `{"id":"a"}` + "\n" + `{"id":` + "\n" + `{"id":"c"}` + "\n", wantErr: "f.jsonl:2: "},
		{name: "last line whole but not a record", file: `{"id":"a"}` + "\n" + `{"x":1}`, after: `{"id":"a"}` + "\n" + `{"x":1}`, wantErr: "f.jsonl:2: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			t.Cleanup(func() { slog.SetDefault(prev) })
			path := filepath.Join(t.TempDir(), "f.jsonl")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var read []string
			f, err := openResumed(path, func(line []byte) error {
				var r struct{ ID string }
				if err := json.Unmarshal(line, &r); err != nil {
					return err
				}
				if r.ID == "" {
					return errors.New("no id")
				}
				read = append(read, r.ID)
				return nil
			})
			if tc.wantErr != "" {
				if !errors.Is(err, ErrForeignDir) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrForeignDir naming %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteString("{}\n")
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(read, tc.read) && tc.wantErr == "" {
				t.Errorf("read %v, want %v", read, tc.read)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != tc.after {
				t.Errorf("file %q (%v), want %q", got, err, tc.after)
			}
			warning := "file=" + path + " line=" + strconv.Itoa(tc.torn)
			if warned := strings.Contains(logs.String(), warning); warned != (tc.torn > 0) {
				t.Errorf("warning naming %s logged: %v, want %v: %q", warning, warned, tc.torn > 0, logs.String())
			}
		})
	}
}
