package rollout

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRecoverPartial resumes from trajectories files an interrupted run
// can leave, and damaged ones: the records it keeps are the ones the
// readers read (TestTornLastRecord), each located where the file it leaves
// for appending holds it; a damaged file is an error that leaves it as it
// was.
func TestRecoverPartial(t *testing.T) {
	a, b, c := recordLine(t, "a"), recordLine(t, "b"), recordLine(t, "c")
	tests := []struct {
		name, file string
		want       []string
		// after is the file left for appending (the same on an error);
		// torn, the line left out with a warning; wantErr, the error.
		after   string
		torn    int
		wantErr string
	}{
		{"empty file", "", nil, "", 0, ""},
		{"complete", a + "\n" + b + "\n", []string{"a", "b"}, a + "\n" + b + "\n", 0, ""},
		{"torn last line", a + "\n" + b + "\n" + c[:20], []string{"a", "b"}, a + "\n" + b + "\n", 3, ""},
		{"last record without its newline", a + "\n" + b, []string{"a", "b"}, a + "\n" + b + "\n", 0, ""},
		{"damaged line in the middle", a + "\n" + b[:20] + "\n" + c + "\n", nil, a + "\n" + b[:20] + "\n" + c + "\n", 0, TrajectoriesFile + ":2: "},
		{"damaged line in the middle and a torn last line", a + "\n" + b[:20] + "\n" + c + "\n" + c[:20], nil, a + "\n" + b[:20] + "\n" + c + "\n" + c[:20], 0, TrajectoriesFile + ":2: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, logs := writeLogged(t, t.TempDir(), tc.file)
			done, err := recoverPartial(path)
			var de *DamagedError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (!errors.As(err, &de) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "delete the line")):
				t.Fatalf("error %v, want a DamagedError naming %q and what to do", err, tc.wantErr)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if string(after) != tc.after {
				t.Errorf("file left as %q, want %q", after, tc.after)
			}
			var ids []string
			for id, o := range done {
				ids = append(ids, id)
				// writeFinal copies each record by its location.
				if o.Offset < 0 || o.Offset+o.Length > int64(len(after)) {
					t.Fatalf("%s located at %d+%d in a file of %d bytes", id, o.Offset, o.Length, len(after))
				}
				rec := after[o.Offset : o.Offset+o.Length]
				if got, err := outcomeOfLine(rec); err != nil || got.TaskID != id || !bytes.HasSuffix(rec, []byte("\n")) {
					t.Errorf("%s located at %q, want its record and newline (%v)", id, rec, err)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("recovered %v, want %v", ids, tc.want)
			}
			warning := "file=" + path + " line=" + strconv.Itoa(tc.torn)
			if warned := strings.Contains(logs.String(), warning); warned != (tc.torn > 0) {
				t.Errorf("warning naming %s logged: %v, want %v: %q", warning, warned, tc.torn > 0, logs.String())
			}
		})
	}
	t.Run("no file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), TrajectoriesFile)
		if done, err := recoverPartial(path); err != nil || len(done) != 0 {
			t.Fatalf("recovered %v, %v; want nothing", done, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file created: %v", err)
		}
	})
}
