package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// StageStore keeps finished stages by content, beside the response cache,
// so that a later run whose stage has the same inputs (tasks, environment,
// endpoints and parameters, guideline content, seed) takes it from the
// store instead of replaying it. A nightly run whose tasks and agent did
// not change pays nothing for its baseline.
//
// An entry is a copy of the stage directory (hard links where the file
// system allows; every file in it is written once, by rename) plus the
// files the stage wrote elsewhere in the run directory, under outputs/.
type StageStore struct {
	dir string
}

// storeOutputs holds, inside an entry, the run-directory files a stage
// wrote outside its own directory.
const storeOutputs = "outputs"

// StageStoreDir is where the store of a cache at cachePath lives.
func StageStoreDir(cachePath string) string {
	return filepath.Join(filepath.Dir(cachePath), "stages")
}

// entry is the directory of a stage's inputs.
func (s *StageStore) entry(name, hash string) string {
	sum := sha256.Sum256([]byte(name + "\n" + hash))
	key := hex.EncodeToString(sum[:])
	return filepath.Join(s.dir, key[:2], key)
}

// lookup returns the entry of a finished stage, or "".
func (s *StageStore) lookup(name, hash string) string {
	if s == nil {
		return ""
	}
	e := s.entry(name, hash)
	b, err := os.ReadFile(filepath.Join(e, ManifestFile))
	if err != nil {
		return ""
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil || m.Status != statusDone || m.InputsHash != hash {
		return ""
	}
	s.touch(e)
	return e
}

// restore fills the empty stage directory dir and the run directory's
// outputs from entry e.
func (s *StageStore) restore(e, dir, runDir string) error {
	if err := copyTree(e, dir, func(rel string) bool { return rel != storeOutputs }, false); err != nil {
		return err
	}
	out := filepath.Join(e, storeOutputs)
	if _, err := os.Stat(out); err != nil {
		return nil
	}
	// Outputs are merged: the registry's files are named by content, so a
	// file already present is the same.
	return copyTree(out, runDir, nil, true)
}

// save stores the finished stage in dir with the run-directory paths it
// wrote outside dir. An entry already there is kept: it came from the same
// inputs.
func (s *StageStore) save(name, hash, dir, runDir string, outputs []string) error {
	if s == nil {
		return nil
	}
	e := s.entry(name, hash)
	if _, err := os.Stat(e); err == nil {
		s.touch(e)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(e), 0o755); err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(e), ".tmp-*")
	if err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(dir, tmp, nil, false); err != nil {
		return err
	}
	for _, rel := range outputs {
		src := filepath.Join(runDir, rel)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := copyTree(src, filepath.Join(tmp, storeOutputs, rel), nil, false); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, e); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(e); serr == nil {
			return nil // another run stored it first
		}
		return fmt.Errorf("stage store: %w", err)
	}
	s.touch(e)
	return nil
}

// copyTree copies the directory src to dst (created), linking files where
// it can. keep, when set, filters src's top-level entries; with merge,
// files already in dst are kept.
func copyTree(src, dst string, keep func(rel string) bool, merge bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if keep != nil && rel != "." && filepath.Dir(rel) == "." && !keep(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if _, err := os.Stat(target); merge && err == nil {
			return nil
		}
		return linkOrCopy(path, target)
	})
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("stage store: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	slog.Debug("stage store copied a file it could not link", "file", src)
	return nil
}

// touch marks entry e as used now; pruning evicts the least recently used
// entries first. The entry directory's own time is used: its files are
// hard links shared with run directories.
func (s *StageStore) touch(e string) {
	now := time.Now()
	if err := os.Chtimes(e, now, now); err != nil {
		slog.Debug("stage store: cannot mark an entry used", "entry", e, "err", err)
	}
}

// StorePruneResult says what PruneStageStore removed.
type StorePruneResult struct {
	Removed     int   `json:"removed"`
	Temps       int   `json:"temps"` // temporary directories of killed saves
	Entries     int   `json:"entries"`
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
}

type storeEntry struct {
	path  string
	used  time.Time
	bytes int64
}

// PruneStageStore deletes the entries of the stage store in dir last used
// longer ago than olderThan (0: no age limit), then the least recently used
// ones until the store holds at most maxBytes (<= 0: no size limit), and
// the temporary directories of saves killed (atomicfile.StaleAfter). Entries
// used at or after keep are never deleted, so a run can bound the store
// without losing what it just stored. Sizes count every file in full,
// though run directories may share them through hard links. An entry is
// renamed away before it is deleted, so a lookup never sees half of one;
// a run restoring it at that moment runs the stage instead.
func PruneStageStore(dir string, olderThan time.Duration, maxBytes int64, keep time.Time) (StorePruneResult, error) {
	var res StorePruneResult
	entries, err := listStore(dir)
	if err != nil {
		return res, err
	}
	now := time.Now()
	var errs []error
	if res.Temps, err = atomicfile.SweepStale(dir, atomicfile.StaleAfter); err != nil {
		errs = append(errs, fmt.Errorf("stage store: %w", err))
	}
	slices.SortFunc(entries, func(a, b storeEntry) int { return a.used.Compare(b.used) })
	for _, e := range entries {
		res.BytesBefore += e.bytes
	}
	res.BytesAfter = res.BytesBefore
	res.Entries = len(entries)
	// Oldest first: once an entry is neither too old nor needed to fit,
	// or is protected by keep, so is every later one.
	for _, e := range entries {
		old := olderThan > 0 && now.Sub(e.used) > olderThan
		over := maxBytes > 0 && res.BytesAfter > maxBytes
		if (!old && !over) || (!keep.IsZero() && !e.used.Before(keep)) {
			break
		}
		if err := evictEntry(e.path); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Removed++
		res.Entries--
		res.BytesAfter -= e.bytes
	}
	return res, errors.Join(errs...)
}

// StageStoreStats counts the entries and bytes of the stage store in dir.
func StageStoreStats(dir string) (entries int, bytes int64, err error) {
	es, err := listStore(dir)
	for _, e := range es {
		bytes += e.bytes
	}
	return len(es), bytes, err
}

// listStore returns the entries of the store in dir; temporary
// directories (hidden) are not entries. A missing store is empty.
func listStore(dir string) (entries []storeEntry, err error) {
	shards, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stage store: %w", err)
	}
	for _, sh := range shards {
		if !sh.IsDir() {
			continue
		}
		shard := filepath.Join(dir, sh.Name())
		ents, err := os.ReadDir(shard)
		if err != nil {
			return nil, fmt.Errorf("stage store: %w", err)
		}
		for _, d := range ents {
			path := filepath.Join(shard, d.Name())
			fi, err := d.Info()
			if err != nil || !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
				continue // removed meanwhile, or not an entry
			}
			e := storeEntry{path: path, used: fi.ModTime()}
			err = filepath.WalkDir(path, func(_ string, f fs.DirEntry, err error) error {
				if err != nil || f.IsDir() {
					return err
				}
				if info, err := f.Info(); err == nil {
					e.bytes += info.Size()
				}
				return nil
			})
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("stage store: %w", err)
			}
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// evictEntry renames entry e away, then deletes it.
func evictEntry(e string) error {
	gone := filepath.Join(filepath.Dir(e), ".tmp-evicted-"+filepath.Base(e))
	if err := os.Rename(e, gone); err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("stage store: %w", err)
	}
	return nil
}
