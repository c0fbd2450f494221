// Package atomicfile writes files so that readers see the old content or the
// new, never a part: a temp file in the same directory, synced, then renamed.
// Files and directories it creates follow the process umask, like any file
// the user's tools create.
package atomicfile

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// umask is the process's file mode creation mask, read once at start (it
// can only be read by setting it, so this happens before any goroutine).
var umask = func() os.FileMode {
	old := syscall.Umask(0)
	syscall.Umask(old)
	return os.FileMode(old)
}()

// Perm returns perm with the umask applied.
func Perm(perm os.FileMode) os.FileMode { return perm &^ umask }

// TempSuffix marks the temporary files and directories of an output;
// RemoveStale and SweepStale find them.
const TempSuffix = ".tmp-"

// MkdirTemp creates a new directory in parent named "."+base+TempSuffix and
// a random suffix, with mode 0777 less the umask (os.MkdirTemp makes it
// 0700, which would leave a finished output unreadable to the group).
func MkdirTemp(parent, base string) (string, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		dir := filepath.Join(parent, "."+base+TempSuffix+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o777)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("create temporary directory in %s: too many collisions", parent)
}

// RemoveStale removes the temporary files and directories a killed writer
// of parent/base left behind; call it before writing base again.
func RemoveStale(parent, base string) error {
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+base+TempSuffix) {
			errs = append(errs, os.RemoveAll(filepath.Join(parent, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// WriteFile replaces path with data atomically. When path already holds
// exactly data with that mode it is left alone: re-running finished work
// rewrites the same small files, and each rewrite costs an fsync.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if unchanged(path, data, Perm(perm)) {
		return nil
	}
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// unchanged reports whether path is a regular file with mode perm and
// content data. Any error reading it means it is not.
func unchanged(path string, data []byte, perm os.FileMode) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != perm || fi.Size() != int64(len(data)) {
		return false
	}
	// One byte more than data, to see a file that grew since Stat.
	got := make([]byte, len(data)+1)
	n, _ := io.ReadFull(f, got)
	return n == len(data) && bytes.Equal(got[:n], data)
}

// Write replaces path atomically with what fill writes, so large content
// can be streamed instead of held in memory. When fill fails, path is left
// as it was.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+TempSuffix+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Chmod(tmp, Perm(perm)); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}

// StaleAfter is how long a temporary file or directory must have gone
// unmodified to count as left by a killed writer: live writers rename theirs
// within seconds of the last write.
const StaleAfter = time.Hour

// SweepStale removes, anywhere under root, the temporary files and
// directories of writers killed before they renamed them (kill -9, power
// loss): those named "."+base+TempSuffix+random and not modified for
// olderThan. A live writer's temp file is renamed moments after it is
// last written, so an old one is stale. It returns how many it removed.
func SweepStale(root string, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	n := 0
	var errs []error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		name := d.Name()
		if path == root || !strings.HasPrefix(name, ".") || !strings.Contains(name, TempSuffix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		} else {
			n++
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return n, errors.Join(append(errs, err)...)
}
