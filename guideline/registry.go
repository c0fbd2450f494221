package guideline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// Steps of Algorithm 1 that produce a guideline.
const (
	StepSeed = "seed" // the starting guideline of a run
	StepUT   = "ut"   // utility step: recovers lost facts
	StepCO   = "co"   // compression step: drops what was never used
	// PAACE-Syn's evolutionary teacher-prompt search (optimize synth
	// evolve): one parent rewritten, or two parents combined.
	StepMutation  = "mutation"
	StepCrossover = "crossover"
	// ACE: a playbook after one round's tags and gated delta batch, and
	// the merge of two playbooks learned in parallel.
	StepACE   = "ace"
	StepMerge = "merge"
)

// Validation is the part of a Report kept with a stored guideline.
type Validation struct {
	OK       bool     `json:"ok"`
	Repairs  []Repair `json:"repairs,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// Record describes a stored guideline and where it came from.
type Record struct {
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Parent string `json:"parent,omitempty"`
	// Parents lists every parent, Parent first, when there are several
	// (a crossover).
	Parents     []string           `json:"parents,omitempty"`
	Round       int                `json:"round"`
	Step        string             `json:"step"`
	FeedbackIDs []string           `json:"feedback_ids,omitempty"`
	Validation  Validation         `json:"validation"`
	Scores      map[string]float64 `json:"scores,omitempty"`
	Created     time.Time          `json:"created"`
	// Source says where the guideline came from: "builtin:prompting",
	// "optimizer", "file:path".
	Source   string `json:"source"`
	Promoted bool   `json:"promoted"`
}

// Errors returned (wrapped) for ids that name no guideline or several, and
// for promoting a guideline that failed validation.
var (
	ErrNotFound  = errors.New("guideline not found")
	ErrAmbiguous = errors.New("ambiguous guideline id")
	ErrRejected  = errors.New("guideline was rejected")
)

// Registry stores guidelines in a directory as <id>.tmpl (the repaired
// source) and <id>.json (the Record). The JSON file is written last, so a
// guideline exists once its record does. Methods are safe for concurrent
// use within one process; separate processes must not write one registry
// at the same time.
type Registry struct {
	dir string
	mu  sync.Mutex
	now func() time.Time
}

// OpenRegistry opens the registry in dir, creating dir if needed.
func OpenRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open guideline registry: %w", err)
	}
	return &Registry{dir: dir, now: time.Now}, nil
}

// Dir returns the registry's directory.
func (r *Registry) Dir() string { return r.dir }

// Put validates src as a guideline of rec.Kind and stores it, rejected or
// not, under its content id (the id of the repaired source). rec's ID,
// Validation and Promoted are filled in by Put. It returns the compiled
// template of what it stored, nil when the guideline was rejected, so a
// caller never validates the same source twice. Storing a guideline again
// keeps the first record's lineage, validation and Created, adds new
// feedback ids and merges scores (new values win).
func (r *Registry) Put(rec Record, src string) (Record, *Template, error) {
	if err := checkRecord(&rec); err != nil {
		return Record{}, nil, err
	}
	t, rep := Validate(rec.Kind, src)
	rec, err := r.put(rec, rep.ID, Validation{OK: rep.OK, Repairs: rep.Repairs, Problems: rep.Problems}, rep.Repaired)
	if err != nil {
		return Record{}, nil, err
	}
	return rec, t, nil
}

// PutTemplate stores a guideline compiled earlier (by Put or Validate)
// without parsing or validating it again; otherwise it is Put.
func (r *Registry) PutTemplate(rec Record, t *Template) (Record, error) {
	if err := checkRecord(&rec); err != nil {
		return Record{}, err
	}
	if rec.Kind != t.Kind() {
		return Record{}, fmt.Errorf("put guideline %s: record kind %s does not match the template's %s", t.ID(), rec.Kind, t.Kind())
	}
	return r.put(rec, t.ID(), Validation{OK: true, Repairs: t.repairs}, t.Source())
}

// Score merges scores into the stored record of id (new values win). The
// source is neither read nor validated again.
func (r *Registry) Score(id string, scores map[string]float64) (Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, err := r.load(id)
	if err != nil {
		return Record{}, fmt.Errorf("score guideline: %w", err)
	}
	rec := merge(old, Record{Scores: scores})
	if err := r.store(rec); err != nil {
		return Record{}, fmt.Errorf("score guideline %s: %w", rec.ID, err)
	}
	return rec, nil
}

// checkRecord checks rec's kind and step, defaulting an empty step of a
// guideline without parent to seed.
func checkRecord(rec *Record) error {
	if _, err := ParseKind(string(rec.Kind)); err != nil {
		return fmt.Errorf("put guideline: %w", err)
	}
	switch rec.Step {
	case StepSeed, StepUT, StepCO, StepMutation, StepCrossover, StepACE, StepMerge:
	case "":
		if rec.Parent != "" {
			return fmt.Errorf("put guideline: step is empty but parent is %s; want ut, co, mutation, crossover, ace or merge", rec.Parent)
		}
		rec.Step = StepSeed
	default:
		return fmt.Errorf("put guideline: unknown step %q; want seed, ut, co, mutation, crossover, ace or merge", rec.Step)
	}
	return nil
}

// put stores src, already validated, under id with the validation v.
func (r *Registry) put(rec Record, id string, v Validation, src string) (Record, error) {
	if rec.ID != "" && rec.ID != id {
		return Record{}, fmt.Errorf("put guideline: record id %s does not match the content id %s", rec.ID, id)
	}
	rec.ID = id
	rec.Validation = v
	rec.Promoted = false

	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Parent != "" {
		parent, err := r.load(rec.Parent)
		if err != nil {
			return Record{}, fmt.Errorf("put guideline %s: parent: %w", rec.ID, err)
		}
		rec.Parent = parent.ID
	}
	old, err := r.load(rec.ID)
	switch {
	case err == nil:
		rec = merge(old, rec)
	case errors.Is(err, ErrNotFound):
		if rec.Created.IsZero() {
			rec.Created = r.now().UTC()
		}
	default:
		return Record{}, fmt.Errorf("put guideline %s: %w", rec.ID, err)
	}
	if err := atomicfile.WriteFile(r.path(rec.ID, ".tmpl"), []byte(src), 0o644); err != nil {
		return Record{}, fmt.Errorf("put guideline: %w", err)
	}
	if err := r.store(rec); err != nil {
		return Record{}, fmt.Errorf("put guideline: %w", err)
	}
	return rec, nil
}

// merge folds a repeated Put of the same content into the stored record.
// The first validation stays: a later Put of the already repaired source
// would otherwise erase the record of what was repaired.
func merge(old, rec Record) Record {
	out := old
	for _, id := range rec.FeedbackIDs {
		if !slices.Contains(out.FeedbackIDs, id) {
			out.FeedbackIDs = append(out.FeedbackIDs, id)
		}
	}
	if len(rec.Scores) > 0 {
		if out.Scores == nil {
			out.Scores = map[string]float64{}
		}
		maps.Copy(out.Scores, rec.Scores)
	}
	if out.Source == "" {
		out.Source = rec.Source
	}
	return out
}

// Get returns the record and source of the guideline whose id is id or
// starts with id (at least 4 characters; the kind prefix may be left out).
func (r *Registry) Get(id string) (Record, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.load(id)
	if err != nil {
		return Record{}, "", err
	}
	src, err := os.ReadFile(r.path(rec.ID, ".tmpl"))
	if err != nil {
		return Record{}, "", fmt.Errorf("guideline %s: %w", rec.ID, err)
	}
	return rec, string(src), nil
}

// List returns every record, oldest first (ties by id).
func (r *Registry) List() ([]Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids, err := r.ids()
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, len(ids))
	for _, id := range ids {
		rec, err := r.read(id)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Created.Equal(recs[j].Created) {
			return recs[i].Created.Before(recs[j].Created)
		}
		return recs[i].ID < recs[j].ID
	})
	return recs, nil
}

// Lineage returns the chain of records from the seed down to id.
func (r *Registry) Lineage(id string) ([]Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.load(id)
	if err != nil {
		return nil, err
	}
	chain := []Record{rec}
	seen := map[string]bool{rec.ID: true}
	for rec.Parent != "" {
		if seen[rec.Parent] {
			return nil, fmt.Errorf("lineage of %s: cycle at %s", id, rec.Parent)
		}
		seen[rec.Parent] = true
		if rec, err = r.read(rec.Parent); err != nil {
			return nil, fmt.Errorf("lineage of %s: %w", id, err)
		}
		chain = append(chain, rec)
	}
	slices.Reverse(chain)
	return chain, nil
}

// Diff returns a unified diff from guideline a to guideline b ("" if their
// sources are equal).
func (r *Registry) Diff(a, b string) (string, error) {
	ra, sa, err := r.Get(a)
	if err != nil {
		return "", err
	}
	rb, sb, err := r.Get(b)
	if err != nil {
		return "", err
	}
	return unifiedDiff(ra.ID+".tmpl", rb.ID+".tmpl", sa, sb), nil
}

// Promote marks id as the production guideline of its kind, unmarks the
// previous one and writes its source to promoted-<kind>.tmpl, which is what
// a server loads. Rejected guidelines cannot be promoted.
func (r *Registry) Promote(id string) (Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.load(id)
	if err != nil {
		return Record{}, err
	}
	if !rec.Validation.OK {
		return Record{}, fmt.Errorf("promote %s: %w: %s", rec.ID, ErrRejected, strings.Join(rec.Validation.Problems, "; "))
	}
	src, err := os.ReadFile(r.path(rec.ID, ".tmpl"))
	if err != nil {
		return Record{}, fmt.Errorf("promote %s: %w", rec.ID, err)
	}
	rec.Promoted = true
	if err := r.store(rec); err != nil {
		return Record{}, fmt.Errorf("promote %s: %w", rec.ID, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(r.dir, PromotedFile(rec.Kind)), src, 0o644); err != nil {
		return Record{}, fmt.Errorf("promote %s: %w", rec.ID, err)
	}
	ids, err := r.ids()
	if err != nil {
		return Record{}, fmt.Errorf("promote %s: %w", rec.ID, err)
	}
	for _, other := range ids {
		if other == rec.ID {
			continue
		}
		o, err := r.read(other)
		if err != nil {
			return Record{}, fmt.Errorf("promote %s: %w", rec.ID, err)
		}
		if o.Promoted && o.Kind == rec.Kind {
			o.Promoted = false
			if err := r.store(o); err != nil {
				return Record{}, fmt.Errorf("promote %s: unpromote %s: %w", rec.ID, o.ID, err)
			}
		}
	}
	return rec, nil
}

// PromotedFile is the name, inside a registry, of the promoted guideline of
// kind.
func PromotedFile(kind Kind) string { return "promoted-" + string(kind) + ".tmpl" }

func (r *Registry) path(id, ext string) string { return filepath.Join(r.dir, id+ext) }

// ids lists stored ids; temp files of atomic writes start with a dot.
func (r *Registry) ids() ([]string, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("guideline registry: %w", err)
	}
	var ids []string
	for _, e := range ents {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") {
			ids = append(ids, strings.TrimSuffix(name, ".json"))
		}
	}
	return ids, nil
}

// load resolves an id or unique prefix and reads its record.
func (r *Registry) load(id string) (Record, error) {
	if strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return Record{}, fmt.Errorf("guideline id %q: %w (not an id)", id, ErrNotFound)
	}
	if _, err := os.Stat(r.path(id, ".json")); err == nil {
		return r.read(id)
	}
	if len(id) < 4 {
		return Record{}, fmt.Errorf("guideline id %q: %w (give at least 4 characters)", id, ErrNotFound)
	}
	ids, err := r.ids()
	if err != nil {
		return Record{}, err
	}
	var matches []string
	for _, full := range ids {
		_, hash, _ := strings.Cut(full, "-")
		if strings.HasPrefix(full, id) || strings.HasPrefix(hash, id) {
			matches = append(matches, full)
		}
	}
	switch len(matches) {
	case 0:
		return Record{}, fmt.Errorf("guideline id %q in %s: %w", id, r.dir, ErrNotFound)
	case 1:
		return r.read(matches[0])
	}
	sort.Strings(matches)
	return Record{}, fmt.Errorf("%w %q: it matches %s", ErrAmbiguous, id, strings.Join(matches, ", "))
}

func (r *Registry) read(id string) (Record, error) {
	b, err := os.ReadFile(r.path(id, ".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("guideline %s in %s: %w", id, r.dir, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("guideline %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("guideline record %s: %w", r.path(id, ".json"), err)
	}
	return rec, nil
}

func (r *Registry) store(rec Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(r.path(rec.ID, ".json"), append(b, '\n'), 0o644)
}
