package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/rollout"
)

// Files of the nightly state directory.
const (
	// CursorFile says how far the session log has been consumed.
	CursorFile = "cursor.json"
	// CurrentFile marks a night begun and not finished; a run resumes it.
	CurrentFile = "current.json"
	// PromotionsFile logs each promotion, one line per night at most.
	PromotionsFile = "promotions.jsonl"
	// NightsDir holds each night's work under its id.
	NightsDir = "nights"
	lockFile  = "lock"
)

// Files of a night's directory.
const (
	nightSessions  = "sessions.jsonl"
	nightImported  = "imported"
	nightIncumbent = "incumbent.tmpl"
	nightRun       = "run"
	nightEval      = "eval"
	// DecisionFile is the gate's decision, written before any promotion.
	DecisionFile = "decision.json"
	// NightReportFile is the night's report.
	NightReportFile = "report.md"
)

// Cursor is how far the session log has been consumed: the file (its
// inode tells a replaced log from a grown one) and the byte offset past
// the last line taken.
type Cursor struct {
	File   string `json:"file"`
	Inode  uint64 `json:"inode"`
	Offset int64  `json:"offset"`
	// Night is the last night that finished.
	Night string `json:"night,omitempty"`
}

// Night is one night's work, fixed when it begins (current.json) so that a
// run killed anywhere resumes the same night on the same sessions against
// the same incumbent.
type Night struct {
	ID string `json:"id"`
	// From and To delimit the session log bytes of this night.
	File  string `json:"file"`
	Inode uint64 `json:"inode"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	// Incumbent is the guideline promoted when the night began (its id;
	// its source is the night's incumbent.tmpl), and IncumbentInRegistry
	// whether serve's registry holds it.
	Incumbent       string `json:"incumbent"`
	IncumbentOrigin string `json:"incumbent_origin"`
	Started         string `json:"started"`
}

// Promotion is one line of promotions.jsonl.
type Promotion struct {
	Night     string `json:"night"`
	Guideline string `json:"guideline"`
	Previous  string `json:"previous"`
	Time      string `json:"time"`
}

// lockState takes the state directory's lock, so two nightly runs never
// work at once; the kernel drops it when the process dies, however.
func lockState(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nightly state: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nightly state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("nightly state %s is locked by another optimize nightly: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// pending finds what of the session log lies past the cursor up to its
// last complete line: the log's inode and the byte range [from, to), empty
// when there is nothing new. A log whose inode changed, or that is shorter
// than the cursor, was replaced and is read from its start. It reads only
// the tail it needs to find that line's end, whatever the log's size.
func pending(path string, c Cursor) (ino uint64, from, to int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("session log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("session log: %w", err)
	}
	ino = inode(fi)
	from = c.Offset
	if (c.Inode != 0 && ino != c.Inode) || fi.Size() < from {
		from = 0
	}
	// serve may be appending: take what is there now, up to the last
	// complete line; the rest is the next night's.
	to, err = lineEnd(f, from, fi.Size())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("session log: %w", err)
	}
	return ino, from, to, nil
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// lineEnd returns the offset just past the last newline of f in
// [from, size), or from when there is none, reading backwards in blocks.
func lineEnd(f *os.File, from, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return from, nil
}

// copyRange copies bytes [from, to) of the session log at path, which must
// still be the file of inode ino, to dst atomically, streaming.
func copyRange(path string, ino uint64, from, to int64, dst string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("session log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session log: %w", err)
	}
	if inode(fi) != ino || fi.Size() < to {
		return fmt.Errorf("session log %s was replaced while the night began; run again", path)
	}
	return atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, io.NewSectionReader(f, from, to-from))
		return err
	})
}

// nightID is a night's dated id: the UTC time it began.
func nightID(t time.Time) string { return t.UTC().Format("2006-01-02T150405Z") }

// promotedIn reports whether promotions.jsonl records a promotion by
// night. A torn last line (a kill mid-append) is no promotion, by the
// format's one rule; any other damaged line is an error.
func promotedIn(stateDir, night string) (bool, error) {
	path := filepath.Join(stateDir, PromotionsFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("promotions log: %w", err)
	}
	defer f.Close()
	rd := jsonl.NewReader(f, path, jsonl.Limits{})
	for {
		line, err := rd.NonBlank()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var p Promotion
		if err := json.Unmarshal(line, &p); err != nil {
			if rd.SkipTorn(err) {
				return false, nil
			}
			return false, fmt.Errorf("%s:%d: %w", path, rd.Line(), err)
		}
		if p.Night == night {
			return true, nil
		}
	}
}

// logPromotion appends p to promotions.jsonl as one complete line, after
// mending a line an earlier run left torn.
func logPromotion(stateDir string, p Promotion) error {
	f, err := os.OpenFile(filepath.Join(stateDir, PromotionsFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("promotions log: %w", err)
	}
	line, err := json.Marshal(p)
	if err == nil {
		_, _, err = jsonl.Mend(f, jsonl.Limits{})
	}
	if err == nil {
		_, err = f.Write(append(line, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("promotions log: %w", err)
	}
	return nil
}

// writeState writes a state file atomically.
func writeState(path string, v any) error { return rollout.WriteJSON(path, v) }

// writeBytes writes a night's file atomically.
func writeBytes(path string, b []byte) error { return atomicfile.WriteFile(path, b, 0o644) }
