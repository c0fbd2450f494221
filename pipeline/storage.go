package pipeline

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// RunStore holds what the processes of a run share when its work runs
// elsewhere (the resolved job, the records workers leave, the spend
// ledger) under the run directory's layout, in a bucket
// (gocloud.dev/blob: file://, s3://, gs://, azblob://).
type RunStore struct {
	url string
	b   *blob.Bucket
	// dir is the store's directory when it is file://: deleting a prefix
	// there removes the directories it leaves too.
	dir string
}

// RunStoreURL is the store of the run named run under the bucket URL
// storage (its prefix parameter, if any, kept in front); an empty storage
// is the run directory itself.
func RunStoreURL(storage, runDir string) (string, error) {
	if storage == "" {
		abs, err := filepath.Abs(runDir)
		if err != nil {
			return "", err
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "metadata=skip"}).String(), nil
	}
	u, err := url.Parse(storage)
	if err != nil {
		return "", fmt.Errorf("engine.storage: %w", err)
	}
	q := u.Query()
	prefix := q.Get("prefix")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	q.Set("prefix", prefix+filepath.Base(runDir)+"/")
	if u.Scheme == "file" && q.Get("metadata") == "" {
		q.Set("metadata", "skip")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// OpenRunStore opens the store at url (RunStoreURL).
func OpenRunStore(ctx context.Context, raw string) (*RunStore, error) {
	b, err := blob.OpenBucket(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("open run store %s: %w", raw, err)
	}
	s := &RunStore{url: raw, b: b}
	if u, err := url.Parse(raw); err == nil && u.Scheme == "file" {
		s.dir = filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(u.Query().Get("prefix")))
	}
	return s, nil
}

// URL is the store's URL, as workers open it.
func (s *RunStore) URL() string { return s.url }

// Close closes the bucket.
func (s *RunStore) Close() error { return s.b.Close() }

// Put writes key whole: a reader sees all of it or none.
func (s *RunStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.b.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// Get reads key; a missing key is an error that wraps os.ErrNotExist's
// meaning as ErrNoObject.
func (s *RunStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.b.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("read %s: %w", key, ErrNoObject)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// ErrNoObject is a key the store does not hold.
var ErrNoObject = errors.New("no such object")

// Exists reports whether key is there.
func (s *RunStore) Exists(ctx context.Context, key string) (bool, error) {
	return s.b.Exists(ctx, key)
}

// List returns the keys under prefix.
func (s *RunStore) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		keys = append(keys, o.Key)
	}
}

// DeletePrefix deletes every key under prefix.
func (s *RunStore) DeletePrefix(ctx context.Context, prefix string) error {
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.b.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	if s.dir != "" {
		return os.RemoveAll(filepath.Join(s.dir, filepath.FromSlash(prefix)))
	}
	return nil
}

// mirrorSkip reports whether key is one the run's mirror leaves alone:
// the spend ledger (only ever summed in place) and the records workers
// leave beside a rollout (published from the store, remote.go).
func mirrorSkip(key string) bool {
	return strings.HasPrefix(key, LedgerDir+"/") || strings.Contains(key, remoteSuffix+"/")
}

// Mirror is a local copy of a run store's run directory: the stage work
// a worker does reads and writes it like a run directory, and Upload puts
// back what changed.
type Mirror struct {
	Dir string
	// have is the SHA-256 of each file as downloaded or uploaded.
	have map[string][32]byte
}

// Download copies every object of the run (but ledger entries and worker
// records) into dir, which must be empty or missing.
func (s *RunStore) Download(ctx context.Context, dir string) (*Mirror, error) {
	m := &Mirror{Dir: dir, have: map[string][32]byte{}}
	keys, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if mirrorSkip(k) {
			continue
		}
		b, err := s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		m.have[k] = sha256.Sum256(b)
	}
	return m, nil
}

// Upload makes the store's run directory what m.Dir holds: it writes the
// files that changed and deletes the objects whose file is gone (a stage
// that started over, a staging directory renamed), leaving the ledger and
// worker records alone.
func (s *RunStore) Upload(ctx context.Context, m *Mirror) error {
	now := map[string]bool{}
	err := filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(m.Dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if mirrorSkip(key) {
			return nil
		}
		now[key] = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if h := sha256.Sum256(b); h != m.have[key] {
			if err := s.Put(ctx, key, b); err != nil {
				return err
			}
			m.have[key] = h
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", m.Dir, err)
	}
	for k := range m.have {
		if now[k] {
			continue
		}
		if err := s.b.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("delete %s: %w", k, err)
		}
		delete(m.have, k)
		s.removeEmptyParents(k)
	}
	return nil
}

// removeEmptyParents removes the directories of key that deleting it left
// empty, when the store is a directory (a bucket has no directories).
func (s *RunStore) removeEmptyParents(key string) {
	if s.dir == "" {
		return
	}
	for d := filepath.Dir(filepath.Join(s.dir, filepath.FromSlash(key))); strings.HasPrefix(d, s.dir+string(filepath.Separator)); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty (or gone): its parents are not empty either
			return
		}
	}
}
