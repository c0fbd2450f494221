package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
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
