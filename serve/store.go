package serve

import (
	"container/list"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// session is a conversation's rolling summary: Summary covers the raw
// messages [head, head+Covered) of the conversation, whose hash is
// PrefixHash, so a client that edits its history is noticed.
type session struct {
	ID          string    `json:"id"`
	Summary     string    `json:"summary"`
	Covered     int       `json:"covered"`
	PrefixHash  string    `json:"prefix_hash"`
	GuidelineID string    `json:"guideline_id,omitempty"`
	Link        string    `json:"link,omitempty"`
	Updated     time.Time `json:"updated"`
}

var sessionBucket = []byte("sessions")

// store keeps sessions in memory, least recently used first out, each for
// ttl after its last update; with a path, a bbolt file keeps them across
// restarts.
type store struct {
	ttl time.Duration
	max int
	db  *bolt.DB
	now func() time.Time

	mu    sync.Mutex
	order *list.List // of *session, most recently used at the front
	byID  map[string]*list.Element
}

func openStore(path string, ttl time.Duration, max int) (*store, error) {
	s := &store{ttl: ttl, max: max, now: time.Now, order: list.New(), byID: map[string]*list.Element{}}
	if path == "" {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sessions.path: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("sessions.path %s: %w", path, err)
	}
	s.db = db
	var loaded []*session
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(sessionBucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var ss session
			if json.Unmarshal(v, &ss) != nil || s.expired(&ss) {
				return nil // dropped by the sweep below
			}
			loaded = append(loaded, &ss)
			return nil
		})
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sessions.path %s: %w", path, err)
	}
	for _, ss := range loaded {
		s.putLocked(ss)
	}
	s.sweep()
	slog.Info("sessions restored", "path", path, "sessions", s.len())
	return s, nil
}

func (s *store) expired(ss *session) bool { return s.now().Sub(ss.Updated) > s.ttl }

// get returns a copy of the session id, if it is there and fresh.
func (s *store) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	ss := e.Value.(*session)
	if s.expired(ss) {
		s.removeLocked(e)
		return session{}, false
	}
	s.order.MoveToFront(e)
	return *ss, true
}

// put stores ss, evicting the least recently used past max.
func (s *store) put(ss session) {
	ss.Updated = s.now()
	s.mu.Lock()
	evicted := s.putLocked(&ss)
	s.mu.Unlock()
	if s.db == nil {
		return
	}
	b, _ := json.Marshal(ss)
	err := s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(sessionBucket)
		for _, id := range evicted {
			if err := bk.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return bk.Put([]byte(ss.ID), b)
	})
	if err != nil {
		// The in-memory summary still serves; only a restart loses it.
		slog.Warn("session store write", "err", err)
	}
}

func (s *store) putLocked(ss *session) (evicted []string) {
	if e, ok := s.byID[ss.ID]; ok {
		e.Value = ss
		s.order.MoveToFront(e)
	} else {
		s.byID[ss.ID] = s.order.PushFront(ss)
	}
	for s.order.Len() > s.max {
		e := s.order.Back()
		evicted = append(evicted, e.Value.(*session).ID)
		s.removeLocked(e)
	}
	return evicted
}

func (s *store) removeLocked(e *list.Element) {
	s.order.Remove(e)
	delete(s.byID, e.Value.(*session).ID)
}

// sweep drops expired sessions from memory and the file.
func (s *store) sweep() {
	s.mu.Lock()
	for e := s.order.Back(); e != nil; {
		prev := e.Prev()
		if s.expired(e.Value.(*session)) {
			s.removeLocked(e)
		}
		e = prev
	}
	live := make(map[string]bool, len(s.byID))
	for id := range s.byID {
		live[id] = true
	}
	s.mu.Unlock()
	if s.db == nil {
		return
	}
	// Memory is the truth: the file also drops what was evicted at load
	// or never loaded (stale or over max).
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(sessionBucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if !live[string(k)] {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		slog.Warn("session store sweep", "err", err)
	}
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

func (s *store) close() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}
