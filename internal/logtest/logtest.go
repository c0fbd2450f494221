// Package logtest captures the default slog logger's output for tests.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// Buffer holds captured log text. It is safe for the concurrent writes of
// a server's goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Reset drops what was logged so far.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

// Capture sends the default logger's records at level and above, as text,
// to the Buffer it returns until t ends.
func Capture(t testing.TB, level slog.Level) *Buffer {
	t.Helper()
	logs := &Buffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return logs
}
