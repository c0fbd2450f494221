package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
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

// pending returns the bytes of the session log past the cursor up to its
// last complete line, the log's inode and where they start; nil when
// there is nothing new. A log whose inode changed, or that is shorter
// than the cursor, was replaced and is read from its start.
func pending(path string, c Cursor) (data []byte, ino uint64, from int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("session log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("session log: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	from = c.Offset
	if (c.Inode != 0 && ino != c.Inode) || fi.Size() < from {
		from = 0
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, 0, 0, fmt.Errorf("session log: %w", err)
	}
	// serve may be appending: take what is there now, up to the last
	// complete line; the rest is the next night's.
	b, err := io.ReadAll(io.LimitReader(f, fi.Size()-from))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("session log: %w", err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	if end == 0 {
		return nil, ino, from, nil
	}
	return b[:end], ino, from, nil
}

// nightID is a night's dated id: the UTC time it began.
func nightID(t time.Time) string { return t.UTC().Format("2006-01-02T150405Z") }

// promotedIn reports whether promotions.jsonl records a promotion by
// night.
func promotedIn(stateDir, night string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, PromotionsFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var p Promotion
		if json.Unmarshal([]byte(line), &p) == nil && p.Night == night {
			return true, nil
		}
	}
	return false, nil
}

// logPromotion appends p to promotions.jsonl as one complete line.
func logPromotion(stateDir string, p Promotion) error {
	f, err := os.OpenFile(filepath.Join(stateDir, PromotionsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("promotions log: %w", err)
	}
	line, err := json.Marshal(p)
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
