package pipeline

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// TestMain removes what the shared fixtures left once every test is done.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := sharedCleanup.run(); err != nil {
		fmt.Fprintln(os.Stderr, "shared fixtures:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// cleanups are what shared fixtures undo when the tests end: not when the
// test that happened to build one ends, as t.Cleanup would, since later
// tests read it.
type cleanups struct {
	mu  sync.Mutex
	fns []func() error
}

var sharedCleanup cleanups

func (c *cleanups) add(fn func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, fn)
}

// run undoes in reverse order.
func (c *cleanups) run() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.fns) - 1; i >= 0; i-- {
		errs = append(errs, c.fns[i]())
	}
	c.fns = nil
	return errors.Join(errs...)
}

// sharedDir is a directory that lives until the tests end.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pipeline-shared")
	if err != nil {
		t.Fatal(err)
	}
	sharedCleanup.add(func() error { return os.RemoveAll(dir) })
	return dir
}

// shared is a fixture built once, by the first test that asks, for the
// tests that only read it (or add to it what no other reads): building one
// each is most of their CPU. A test that finds the build failed fails.
type shared[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (s *shared[T]) get(t *testing.T, build func(t *testing.T) (T, error)) T {
	t.Helper()
	s.once.Do(func() {
		// Left as it is when build stops the test (t.Fatal).
		s.err = errors.New("the test that built it failed")
		s.v, s.err = build(t)
	})
	if s.err != nil {
		t.Fatalf("shared fixture: %v", s.err)
	}
	return s.v
}
