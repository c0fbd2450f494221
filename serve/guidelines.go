package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxopt/ctxopt/guideline"
)

// activeGuideline is a validated guideline ready to render.
type activeGuideline struct {
	id   string
	kind guideline.Kind
	tmpl *guideline.Template
}

// guidelines serves the registry's promoted guidelines, swapped
// atomically: a request reads the pointer once, so a swap never fails it.
// The history guideline is required (the proxy compresses history); the
// observation one serves the compression API when promoted.
type guidelines struct {
	reg *guideline.Registry
	m   *metrics

	cur, obs atomic.Pointer[activeGuideline]

	mu     sync.Mutex // serializes reloads and guards stamps and byID
	stamps map[guideline.Kind]string
	byID   map[string]*activeGuideline
}

func newGuidelines(dir string, m *metrics) (*guidelines, error) {
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		return nil, err
	}
	return &guidelines{reg: reg, m: m, stamps: map[guideline.Kind]string{}, byID: map[string]*activeGuideline{}}, nil
}

// current is the promoted guideline, nil before one was loaded.
func (g *guidelines) current() *activeGuideline { return g.cur.Load() }

func activate(kind guideline.Kind, src string) (*activeGuideline, error) {
	t, rep := guideline.Validate(kind, src)
	if !rep.OK || t == nil {
		return nil, fmt.Errorf("guideline %s is invalid: %s", rep.ID, strings.Join(rep.Problems, "; "))
	}
	return &activeGuideline{id: t.ID(), kind: kind, tmpl: t}, nil
}

// reload loads the promoted guidelines whose files changed since the last
// load. An invalid promotion keeps the guideline in service. The error
// is about the history guideline; a missing observation one is no error.
func (g *guidelines) reload() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.reloadKind(guideline.KindHistory, &g.cur)
	if oerr := g.reloadKind(guideline.KindObservation, &g.obs); oerr != nil && !errors.Is(oerr, fs.ErrNotExist) {
		slog.Warn("observation guideline", "err", oerr)
	}
	return err
}

func (g *guidelines) reloadKind(kind guideline.Kind, cur *atomic.Pointer[activeGuideline]) error {
	file := filepath.Join(g.reg.Dir(), guideline.PromotedFile(kind))
	st, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no promoted %s guideline in %s (run optimize guideline promote): %w", kind, g.reg.Dir(), err)
	}
	if err != nil {
		return fmt.Errorf("promoted guideline: %w", err)
	}
	stamp := fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
	if stamp == g.stamps[kind] {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("promoted guideline: %w", err)
	}
	// The stamp moves on even when the file is invalid: it is reported
	// once, and the guideline in service stays.
	g.stamps[kind] = stamp
	a, err := activate(kind, string(b))
	if err != nil {
		g.m.reloads.WithLabelValues("invalid").Inc()
		return fmt.Errorf("%s: %w", file, err)
	}
	if old := cur.Load(); old != nil && old.id == a.id {
		return nil
	}
	cur.Store(a)
	g.byID[a.id] = a
	g.m.reloads.WithLabelValues("ok").Inc()
	g.m.guideline.DeletePartialMatch(prometheus.Labels{"kind": string(kind)})
	g.m.guideline.WithLabelValues(string(kind), a.id).Set(1)
	slog.Info("serving guideline", "kind", kind, "id", a.id, "file", file)
	return nil
}

// get returns the guideline of kind named id ("promoted" or "" for the
// promoted one), validated, from the registry.
func (g *guidelines) get(kind guideline.Kind, id string) (*activeGuideline, error) {
	if id == "" || id == "promoted" {
		cur := &g.cur
		if kind == guideline.KindObservation {
			cur = &g.obs
		}
		if a := cur.Load(); a != nil {
			return a, nil
		}
		return nil, fmt.Errorf("no promoted %s guideline is loaded", kind)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if a, ok := g.byID[id]; ok && a.kind == kind {
		return a, nil
	}
	rec, src, err := g.reg.Get(id)
	if err != nil {
		return nil, registryError(id, err)
	}
	if rec.Kind != kind {
		return nil, fmt.Errorf("guideline %s is a %s guideline, not %s", rec.ID, rec.Kind, kind)
	}
	a, err := activate(kind, src)
	if err != nil {
		return nil, err
	}
	if len(g.byID) > 64 {
		clear(g.byID)
	}
	g.byID[id] = a
	return a, nil
}

// watch reloads every interval until ctx ends.
func (g *guidelines) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A missing promotion is reported once, not every tick.
			if err := g.reload(); err != nil && err.Error() != last {
				last = err.Error()
				slog.Warn("guideline reload", "err", err)
			} else if err == nil {
				last = ""
			}
		}
	}
}

// registryError is what a client is told of a registry error: the id and
// the kind of failure, never the registry's paths, which the log gets.
func registryError(id string, err error) error {
	for _, known := range []error{guideline.ErrNotFound, guideline.ErrAmbiguous, guideline.ErrRejected} {
		if errors.Is(err, known) {
			return fmt.Errorf("id %q: %w", id, known)
		}
	}
	slog.Error("read a guideline from the registry", "id", id, "err", err)
	return fmt.Errorf("id %q could not be read from the registry (the server's log says why)", id)
}
