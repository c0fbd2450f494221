package llm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// cacheLockTimeout is how long OpenCache waits for another process to
// release the store before it gives up.
var cacheLockTimeout = time.Second

// cacheVersion is hashed into every key, so a change of what a key or a
// value means starts a fresh keyspace instead of reading stale entries.
const cacheVersion = 1

var (
	chatBucket  = []byte("chat")
	embedBucket = []byte("embed")
)

// Cache is a content-addressed store of responses, shared by all clients
// and across runs. It is one bbolt file: crash-safe, one writer process.
//
// Writes are committed in the background so callers never wait for an
// fsync; until its commit an entry is served from memory, and Close waits
// for every commit. A crash loses only answers not yet committed, which a
// rerun asks for again.
type Cache struct {
	db   *bolt.DB
	path string

	mu      sync.Mutex
	pending map[string]*pendingPut // by bucket + key
	closed  bool
	werr    error // first failed commit, reported by Close
	writes  sync.WaitGroup
}

type pendingPut struct {
	val []byte
	n   int // commits still running for this key
}

// OpenCache opens or creates the cache at path. It fails with a clear error
// rather than blocking when another process holds the store.
func OpenCache(path string) (*Cache, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cache dir: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cacheLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("cache %s is locked by another optimize process (wait for it or set another cache path)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{chatBucket, embedBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init cache %s: %w", path, err)
	}
	return &Cache{db: db, path: path, pending: map[string]*pendingPut{}}, nil
}

// Close waits for pending writes and releases the store. It reports the
// first write that failed. Clients must not use the cache after Close.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.writes.Wait()
	err := c.werr
	if cerr := c.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close cache %s: %w", c.path, cerr))
	}
	return err
}

func (c *Cache) get(bucket, key []byte) ([]byte, bool) {
	c.mu.Lock()
	p, ok := c.pending[string(bucket)+string(key)]
	c.mu.Unlock()
	if ok {
		return p.val, true
	}
	var v []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		// Values are only valid inside the transaction.
		v = append([]byte(nil), tx.Bucket(bucket).Get(key)...)
		return nil
	})
	return v, err == nil && len(v) > 0
}

// put stores val under key. The commit goes through Batch so concurrent
// writers share one transaction (and one fsync) instead of queueing for the
// single write lock. val must not be modified afterwards.
func (c *Cache) put(bucket, key, val []byte) {
	pk := string(bucket) + string(key)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		slog.Warn("llm cache write after close dropped", "cache", c.path)
		return
	}
	p := c.pending[pk]
	if p == nil {
		p = &pendingPut{}
		c.pending[pk] = p
	}
	p.val = val
	p.n++
	c.writes.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.writes.Done()
		err := c.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, val) })
		c.mu.Lock()
		defer c.mu.Unlock()
		if p.n--; p.n == 0 {
			delete(c.pending, pk)
		}
		if err != nil {
			err = fmt.Errorf("write cache %s: %w", c.path, err)
			slog.Warn("llm cache write failed", "err", err)
			if c.werr == nil {
				c.werr = err
			}
		}
	}()
}

// chatKey is everything that determines a completion. The API key is not
// part of it: the same request answers the same under any key.
type chatKey struct {
	Version     int       `json:"v"`
	BaseURL     string    `json:"base_url"`
	Model       string    `json:"model"`
	Purpose     string    `json:"purpose"`
	Messages    []Message `json:"messages"`
	Tools       []Tool    `json:"tools"`
	Temperature float64   `json:"temperature"`
	Seed        *int      `json:"seed"`
	MaxTokens   int       `json:"max_tokens"`
	Sample      int       `json:"sample"`
}

type embedKey struct {
	Version int    `json:"v"`
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	Input   string `json:"input"`
}

// hashKey is the sha256 of the canonical JSON of k (struct fields marshal
// in declaration order; RawMessage is compacted).
func hashKey(k any) ([]byte, error) {
	b, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("encode cache key: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

func normURL(u string) string { return strings.TrimRight(u, "/") }

// encodeEmbedding packs the prompt token count and the vector as little
// endian uint32 and float32s: a quarter of the size of JSON, no parsing.
func encodeEmbedding(v []float32, tokens int) []byte {
	b := make([]byte, 4+4*len(v))
	binary.LittleEndian.PutUint32(b, uint32(tokens))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4+4*i:], math.Float32bits(f))
	}
	return b
}

func decodeEmbedding(b []byte) ([]float32, int, bool) {
	if len(b) < 4 || len(b)%4 != 0 {
		return nil, 0, false
	}
	tokens := int(binary.LittleEndian.Uint32(b))
	v := make([]float32, (len(b)-4)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4+4*i:]))
	}
	return v, tokens, true
}
