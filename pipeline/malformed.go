package pipeline

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
)

// MalformedFile is where a run records, one JSON line each, the replies
// that could not be used as asked, with the raw reply.
const MalformedFile = "malformed.jsonl"

// malformedLog appends records line by line, one write each; a torn last
// line a crash left is cut off before the next run appends
// (RecordMalformed).
type malformedLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *malformedLog) write(m llm.MalformedReply) {
	b, err := json.Marshal(m)
	if err != nil {
		slog.Warn("malformed reply not recorded", "role", m.Role, "err", err)
		return
	}
	slog.Debug("malformed reply", "role", m.Role, "purpose", m.Purpose, "kind", m.Kind, "detail", m.Detail)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		slog.Warn("malformed reply not recorded", "role", m.Role, "err", err)
	}
}

// RecordMalformed makes every client append the malformed replies it sees
// to path, instead of where an earlier call pointed them. Close stops it.
func (rt *Runtime) RecordMalformed(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("malformed replies log: %w", err)
	}
	// A resumed run appends to the file: mend its last line first, or the
	// next record would be glued to a torn one.
	line, cut, err := jsonl.Mend(f, jsonl.Limits{})
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("malformed replies log: %w", err)
	}
	if cut {
		slog.Warn("malformed replies log: cut off its torn last line (a run stopped mid-write)", "file", path, "line", line)
	}
	if rt.malformed != nil {
		if err := rt.malformed.f.Close(); err != nil {
			slog.Warn("malformed replies log", "err", err)
		}
	}
	rt.malformed = &malformedLog{f: f}
	for _, c := range rt.clients() {
		c.SetMalformedSink(rt.malformed.write)
	}
	return nil
}

// RoleStats returns each role's calls so far, by role name.
func (rt *Runtime) RoleStats() map[string]llm.Stats {
	out := make(map[string]llm.Stats)
	for _, c := range rt.clients() {
		out[c.Role()] = c.Stats()
	}
	return out
}

func (rt *Runtime) clients() []*llm.Client {
	var out []*llm.Client
	for _, c := range []*llm.Client{rt.Agent, rt.Compressor, rt.Optimizer, rt.Judge, rt.Embedder, rt.Generator, rt.Reflector, rt.Curator} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
