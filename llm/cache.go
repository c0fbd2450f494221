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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	// atimeBucket maps bucket name + NUL + key to the entry's last use
	// (unix nanoseconds, big endian), the order of eviction.
	atimeBucket = []byte("atime")
	// metaBucket holds the live size and the last run's lookups.
	metaBucket  = []byte("meta")
	dataBuckets = [][]byte{chatBucket, embedBucket}

	metaLive    = []byte("live_bytes")
	metaLastRun = []byte("last_run")
)

// DefaultCacheMaxBytes bounds the cache when the job names no size.
const DefaultCacheMaxBytes = 2 << 30

// Eviction starts when the pages in use, with those the last commit
// freed, pass pagesHigh of the size limit, and evicts least recently used
// entries until the entries' bytes (keys, values, use times) would fill
// pagesLow of it at the current ratio of pages to entry bytes (B+tree pages
// are half to fully used). A commit writes copies of the pages it changes
// before it frees the old ones, so the rest is headroom for that copy: the
// file does not outgrow the limit.
const (
	pagesHigh = 0.6
	pagesLow  = 0.4
	// maxBatch bounds the puts of one commit, and so its copied pages.
	maxBatch = 64
	// atimeEntry is what an entry's use time adds to the live size.
	atimeEntry = 8 + 48
)

// Cache is a content-addressed store of responses, shared by all clients
// and across runs. It is one bbolt file: crash-safe, one writer process.
//
// Writes are committed in the background so callers never wait for an
// fsync; until its commit an entry is served from memory, and Close waits
// for every commit. A crash loses only answers not yet committed, which a
// rerun asks for again.
//
// With a size limit the least recently used entries are evicted, in the
// background, when the entries pass a share of the limit; an evicted entry
// is a miss, asked for again, so eviction never fails a run.
type Cache struct {
	db   *bolt.DB
	path string
	max  int64
	page int64 // the store's page size

	mu        sync.Mutex
	pending   map[string]*pendingPut // by bucket + key
	touched   map[string]int64       // use times not yet written, by bucket + NUL + key
	live      int64                  // bytes of the entries (approximate between evictions)
	savedLive int64                  // live as last stored in the file
	evicting  bool
	closed    bool
	werr      error // first failed commit, reported by Close
	writes    sync.WaitGroup

	hits, misses, evicted atomic.Int64
}

type pendingPut struct {
	val []byte
	n   int // commits still running for this key
}

// CacheOptions configure OpenCache.
type CacheOptions struct {
	// MaxBytes bounds the file; 0 means DefaultCacheMaxBytes, < 0 no bound.
	MaxBytes int64
}

// OpenCache opens or creates the cache at path. It fails with a clear error
// rather than blocking when another process holds the store.
func OpenCache(path string, opts CacheOptions) (*Cache, error) {
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
	// Grow the file a page at a time, not by doubling, so that its size
	// follows what the entries use.
	db.AllocSize = os.Getpagesize()
	db.MaxBatchSize = maxBatch
	// Info reads the mapped file: only safe before writes can remap it.
	c := &Cache{db: db, path: path, max: opts.MaxBytes, page: int64(db.Info().PageSize), pending: map[string]*pendingPut{}, touched: map[string]int64{}}
	if c.max == 0 {
		c.max = DefaultCacheMaxBytes
	}
	// A cache that is already set up is only read here: a run that looks
	// nothing up commits nothing (each commit is two fsyncs).
	ready := false
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{chatBucket, embedBucket, atimeBucket, metaBucket} {
			if tx.Bucket(b) == nil {
				return nil
			}
		}
		if v := tx.Bucket(metaBucket).Get(metaLive); len(v) == 8 {
			c.live, ready = int64(binary.BigEndian.Uint64(v)), true
		}
		return nil
	})
	if err == nil && !ready {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{chatBucket, embedBucket, atimeBucket, metaBucket} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			// A cache written before sizes were kept is measured once.
			c.live = measureLive(tx)
			return putInt(tx, metaLive, c.live)
		})
	}
	c.savedLive = c.live
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init cache %s: %w", path, err)
	}
	return c, nil
}

func measureLive(tx *bolt.Tx) int64 {
	var n int64
	for _, name := range dataBuckets {
		_ = tx.Bucket(name).ForEach(func(k, v []byte) error {
			n += int64(len(k) + len(v) + atimeEntry)
			return nil
		})
	}
	return n
}

func putInt(tx *bolt.Tx, key []byte, v int64) error {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return tx.Bucket(metaBucket).Put(key, b)
}

// RunStats are one process's lookups in the cache.
type RunStats struct {
	Hits    int64     `json:"hits"`
	Misses  int64     `json:"misses"`
	Evicted int64     `json:"evicted"`
	Closed  time.Time `json:"closed"`
}

// HitRate is hits over lookups, 0 without lookups.
func (s RunStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Close waits for pending writes, records the use times and this run's
// lookups, and releases the store. It reports the first write that
// failed. Clients must not use the cache after Close.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.writes.Wait()
	err := c.werr
	run := RunStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evicted: c.evicted.Load(), Closed: time.Now().UTC()}
	c.mu.Lock()
	idle := len(c.touched) == 0 && run.Hits+run.Misses == 0 && c.live == c.savedLive
	c.mu.Unlock()
	var uerr error
	if !idle {
		uerr = c.db.Update(c.closeTx(run))
	}
	if uerr != nil {
		err = errors.Join(err, fmt.Errorf("write cache %s: %w", c.path, uerr))
	}
	if cerr := c.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close cache %s: %w", c.path, cerr))
	}
	return err
}

// closeTx writes the use times, the live size and the run's lookups.
func (c *Cache) closeTx(run RunStats) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		if err := c.writeTouched(tx); err != nil {
			return err
		}
		if err := putInt(tx, metaLive, c.live); err != nil {
			return err
		}
		if run.Hits+run.Misses == 0 {
			return nil
		}
		b, err := json.Marshal(run)
		if err != nil {
			return err
		}
		return tx.Bucket(metaBucket).Put(metaLastRun, b)
	}
}

func atimeKey(bucket, key []byte) string { return string(bucket) + "\x00" + string(key) }

// writeTouched writes the use times collected since the last write.
func (c *Cache) writeTouched(tx *bolt.Tx) error {
	c.mu.Lock()
	touched := c.touched
	c.touched = map[string]int64{}
	c.mu.Unlock()
	b := tx.Bucket(atimeBucket)
	for k, t := range touched {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(t))
		if err := b.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cache) touch(bucket, key []byte) {
	c.touched[atimeKey(bucket, key)] = time.Now().UnixNano()
}

func (c *Cache) get(bucket, key []byte) ([]byte, bool) {
	c.mu.Lock()
	p, ok := c.pending[string(bucket)+string(key)]
	if ok {
		c.touch(bucket, key)
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return p.val, true
	}
	var v []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		// Values are only valid inside the transaction.
		v = append([]byte(nil), tx.Bucket(bucket).Get(key)...)
		return nil
	})
	if err != nil || len(v) == 0 {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	c.mu.Lock()
	c.touch(bucket, key)
	c.mu.Unlock()
	return v, true
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
	c.touch(bucket, key)
	c.writes.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.writes.Done()
		var fileBytes int64
		err := c.db.Batch(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucket).Put(key, val); err != nil {
				return err
			}
			fileBytes = tx.Size()
			return c.writeTouched(tx)
		})
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
			return
		}
		c.live += int64(len(key) + len(val) + atimeEntry)
		if c.max <= 0 || c.evicting {
			return
		}
		st := c.db.Stats()
		inUse := fileBytes - int64(st.FreePageN)*c.page
		if inUse > int64(float64(c.max)*pagesHigh) && inUse > 0 {
			c.evicting = true
			c.writes.Add(1)
			go c.evict(int64(float64(c.live) * float64(c.max) * pagesLow / float64(inUse)))
		}
	}()
}

// evict removes least recently used entries until the live bytes are at
// most target. It deletes in small commits: a commit copies every page it
// changes before freeing the old ones, and one commit deleting thousands
// of entries would need room for a copy of most of the tree.
func (c *Cache) evict(target int64) {
	defer c.writes.Done()
	defer func() {
		c.mu.Lock()
		c.evicting = false
		c.mu.Unlock()
	}()
	if err := c.db.Update(c.writeTouched); err != nil {
		slog.Warn("llm cache eviction failed", "cache", c.path, "err", err)
		return
	}
	var victims []lruEntry
	var live int64
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		victims, live, err = lruOrder(tx, target, 0)
		return err
	})
	for len(victims) > 0 && err == nil {
		n := min(len(victims), evictChunk)
		err = c.db.Update(func(tx *bolt.Tx) error {
			for _, e := range victims[:n] {
				if err := deleteEntry(tx, e); err != nil {
					return err
				}
				live -= e.size
			}
			return putInt(tx, metaLive, live)
		})
		c.evicted.Add(int64(n))
		victims = victims[n:]
	}
	c.mu.Lock()
	c.live = live
	c.mu.Unlock()
	if err != nil {
		slog.Warn("llm cache eviction failed", "cache", c.path, "err", err)
	}
}

// evictChunk is how many entries one eviction commit deletes.
const evictChunk = 64

type lruEntry struct {
	bucket []byte
	key    []byte
	size   int64
	used   int64
}

// lruOrder returns the entries to delete, oldest use first: those used
// before olderThan (unix nanoseconds; 0: none), then the least recently
// used until the live bytes would be at most target (< 0: no target).
// Entries with no recorded use (written before use times were kept) go
// first. It also returns the live bytes before deleting.
func lruOrder(tx *bolt.Tx, target, olderThan int64) ([]lruEntry, int64, error) {
	at := tx.Bucket(atimeBucket)
	var entries []lruEntry
	var live int64
	for _, name := range dataBuckets {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			e := lruEntry{bucket: name, key: append([]byte(nil), k...), size: int64(len(k) + len(v) + atimeEntry)}
			if t := at.Get([]byte(atimeKey(name, k))); len(t) == 8 {
				e.used = int64(binary.BigEndian.Uint64(t))
			}
			entries = append(entries, e)
			live += e.size
			return nil
		})
		if err != nil {
			return nil, live, err
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].used < entries[j].used })
	left := live
	n := 0
	for _, e := range entries {
		if e.used >= olderThan && (target < 0 || left <= target) {
			break
		}
		left -= e.size
		n++
	}
	return entries[:n], live, nil
}

func deleteEntry(tx *bolt.Tx, e lruEntry) error {
	if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
		return err
	}
	return tx.Bucket(atimeBucket).Delete([]byte(atimeKey(e.bucket, e.key)))
}

// evictTx deletes what lruOrder chooses in one commit and returns how many
// entries it deleted and the live bytes left.
func evictTx(tx *bolt.Tx, target, olderThan int64) (int, int64, error) {
	victims, live, err := lruOrder(tx, target, olderThan)
	if err != nil {
		return 0, live, err
	}
	for _, e := range victims {
		if err := deleteEntry(tx, e); err != nil {
			return 0, live, err
		}
		live -= e.size
	}
	return len(victims), live, nil
}

// chatKey is everything that determines a completion. The API key is not
// part of it: the same request answers the same under any key.
type chatKey struct {
	Version  int       `json:"v"`
	BaseURL  string    `json:"base_url"`
	Model    string    `json:"model"`
	Purpose  string    `json:"purpose"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
	// ToolChoice is left out when empty, so keys made before the option
	// existed still match.
	ToolChoice  string  `json:"tool_choice,omitempty"`
	Temperature float64 `json:"temperature"`
	Seed        *int    `json:"seed"`
	MaxTokens   int     `json:"max_tokens"`
	Sample      int     `json:"sample"`
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
