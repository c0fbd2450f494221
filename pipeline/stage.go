package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/rollout"
)

// Manifest records a stage: what went in (hashed), whether it finished, and
// what it counted and cost. A finished stage whose inputs hash the same is
// skipped on re-run; one that was cut off resumes.
type Manifest struct {
	Stage      string             `json:"stage"`
	InputsHash string             `json:"inputs_hash"`
	Inputs     json.RawMessage    `json:"inputs"`
	Status     string             `json:"status"` // running, done
	Started    time.Time          `json:"started"`
	Finished   time.Time          `json:"finished,omitzero"`
	Counts     map[string]float64 `json:"counts,omitempty"`
	LLMCalls   int                `json:"llm_calls"`
	CacheHits  int                `json:"cache_hits"`
	CostUSD    float64            `json:"cost_usd"`
	// ReusedFrom is the stage store entry the stage was taken from, when
	// an earlier run had finished it with the same inputs.
	ReusedFrom string `json:"reused_from,omitempty"`
}

const (
	statusRunning = "running"
	statusDone    = "done"

	// ManifestFile and ResultFile are what every stage directory holds.
	ManifestFile = "manifest.json"
	ResultFile   = "result.json"
)

// stageSpec is one stage of a run. run does the work in dir and returns
// the result and the counts for the manifest. load reads a finished
// stage's result back from dir; when it is nil, stage saves run's result
// as dir/result.json and decodes that.
//
// With a store, a stage not finished in this run directory is taken from
// the store when an earlier run finished it with the same inputs, and a
// stage that finishes is saved there. owned lists the run-directory paths
// the stage writes outside its directory and replaces; shared those it adds
// files to (the guideline registry).
type stageSpec[T any] struct {
	name   string
	inputs any
	run    func(dir string) (T, map[string]float64, error)
	load   func(dir string) (T, error)

	store         *StageStore
	owned, shared []string
}

// stage runs s in runDir/stages/<name> unless a finished manifest there has
// the same inputs, in which case it returns the saved result without
// running anything. A stage whose inputs changed starts over in a clean
// dir; one that was cut off runs again in its dir (run resumes from what
// it finds there).
func stage[T any](runDir string, meter *Meter, s stageSpec[T]) (T, error) {
	var zero T
	dir := filepath.Join(runDir, "stages", s.name)
	in, err := json.Marshal(s.inputs)
	if err != nil {
		return zero, fmt.Errorf("stage %s: encode inputs: %w", s.name, err)
	}
	sum := sha256.Sum256(in)
	hash := hex.EncodeToString(sum[:])
	v, done, cut, err := s.finished(runDir, dir, hash, meter.started)
	if err != nil || done {
		return v, err
	}
	if meter.ledger == nil {
		// In process a resumed stage's manifest counts what this
		// invocation spent, from when it began; advanced by workers
		// (Advance), what every advance spent on it, from the first.
		cut = nil
	}
	if e := s.store.lookup(s.name, hash); e != "" {
		v, err := s.reuse(e, runDir, dir, hash, in)
		if err == nil {
			slog.Info("stage reused from the stage store", "stage", s.name, "entry", e)
			killpoint.Reach("optimize")
			return v, nil
		}
		slog.Warn("stored stage unreadable, running it", "stage", s.name, "entry", e, "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return zero, fmt.Errorf("stage %s: %w", s.name, err)
		}
	}
	v, err = s.execute(meter, runDir, dir, hash, in, cut)
	if err == nil {
		killpoint.Reach("optimize") // a stage done, the next not begun
	}
	return v, err
}

// finished returns the saved result (done) when dir's manifest says the
// stage finished with inputs hash. Otherwise it leaves dir ready to run:
// cleared when the inputs changed, as it is when the stage was cut off.
//
// A stage this invocation already ran (since: its start), as when a step
// proposes the same candidate twice, is reused without saying so at Info:
// "unchanged" speaks of earlier runs only.
//
// cut is the manifest of a stage that was cut off.
func (s stageSpec[T]) finished(runDir, dir, hash string, since time.Time) (v T, done bool, cut *Manifest, err error) {
	var old Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return v, false, nil, nil
	}
	if err != nil {
		return v, false, nil, fmt.Errorf("stage %s: %w", s.name, err)
	}
	if json.Unmarshal(b, &old) != nil {
		return v, false, nil, nil
	}
	switch {
	case old.InputsHash == hash && old.Status == statusDone:
		v, err := s.loadFrom(dir)
		if err == nil {
			if old.Started.Before(since) {
				slog.Info("stage unchanged, skipped", "stage", s.name)
			} else {
				slog.Debug("stage done earlier in this run, reused", "stage", s.name)
			}
			return v, true, nil, nil
		}
		// A finished stage whose result cannot be read is run again.
		slog.Warn("stage result unreadable, running it again", "stage", s.name, "err", err)
	case old.InputsHash != hash:
		// What the stage wrote outside its directory (the evaluation's
		// rollouts) was made with the old inputs too.
		slog.Info("stage inputs changed, starting over", "stage", s.name)
		if err := s.clear(runDir, dir); err != nil {
			return v, false, nil, fmt.Errorf("stage %s: %w", s.name, err)
		}
	default:
		slog.Info("stage was cut off, resuming", "stage", s.name)
		return v, false, &old, nil
	}
	return v, false, nil, nil
}

// execute runs the stage in dir, recording in its manifest what it spent
// and, once done, its counts; a finished stage is saved to the store.
func (s stageSpec[T]) execute(meter *Meter, runDir, dir, hash string, in []byte, cut *Manifest) (T, error) {
	var zero T
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return zero, fmt.Errorf("stage %s: %w", s.name, err)
	}
	mpath := filepath.Join(dir, ManifestFile)
	m := Manifest{Stage: s.name, InputsHash: hash, Inputs: in, Status: statusRunning, Started: time.Now().UTC()}
	var prior Spend
	if cut != nil {
		m.Started, prior = cut.Started, Spend{Calls: cut.LLMCalls, CacheHits: cut.CacheHits, CostUSD: cut.CostUSD}
	}
	if err := rollout.WriteJSON(mpath, m); err != nil {
		return zero, err
	}
	before := meter.stageSpend()
	v, counts, err := s.run(dir)
	if err == nil && s.load == nil {
		err = rollout.WriteJSON(filepath.Join(dir, ResultFile), v)
	}
	if perr := meter.Persist(); perr != nil && err == nil {
		err = perr
	}
	spent := meter.stageSpend().Sub(before).Add(prior)
	m.LLMCalls, m.CacheHits, m.CostUSD = spent.Calls, spent.CacheHits, spent.CostUSD
	if err != nil {
		_ = rollout.WriteJSON(mpath, m)
		return zero, fmt.Errorf("stage %s: %w", s.name, err)
	}
	m.Status, m.Finished, m.Counts = statusDone, time.Now().UTC(), counts
	if err := rollout.WriteJSON(mpath, m); err != nil {
		return v, err
	}
	if err := s.store.save(s.name, hash, dir, runDir, append(slices.Clone(s.owned), s.shared...)); err != nil {
		// The run has its result; only later runs miss the reuse.
		slog.Warn("stage not saved to the stage store", "stage", s.name, "err", err)
	}
	return v, nil
}

// reuse fills dir (and the run directory's outputs) from store entry e and
// loads the result; the manifest records where it came from.
func (s stageSpec[T]) reuse(e, runDir, dir, hash string, in []byte) (T, error) {
	var zero T
	if err := s.clear(runDir, dir); err != nil {
		return zero, err
	}
	if err := s.store.restore(e, dir, runDir); err != nil {
		return zero, err
	}
	v, err := s.loadFrom(dir)
	if err != nil {
		return zero, err
	}
	now := time.Now().UTC()
	old, _ := os.ReadFile(filepath.Join(e, ManifestFile))
	var m Manifest
	_ = json.Unmarshal(old, &m)
	m = Manifest{Stage: s.name, InputsHash: hash, Inputs: in, Status: statusDone, Started: now, Finished: now, Counts: m.Counts, ReusedFrom: e}
	return v, rollout.WriteJSON(filepath.Join(dir, ManifestFile), m)
}

// clear removes the stage's directory and the run-directory paths it owns.
func (s stageSpec[T]) clear(runDir, dir string) error {
	for _, p := range s.owned {
		if err := os.RemoveAll(filepath.Join(runDir, p)); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

func (s stageSpec[T]) loadFrom(dir string) (T, error) {
	if s.load != nil {
		return s.load(dir)
	}
	var v T
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %w", filepath.Join(dir, ResultFile), err)
	}
	return v, nil
}

// fileHashes name each of dirs (the job's field) with the SHA-256 of its
// file called name, so a directory whose file changed since is another
// input.
func fileHashes(field string, dirs []string, name string) ([]string, error) {
	out := make([]string, len(dirs))
	for i, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, invalid(fmt.Errorf("%s[%d]: %w", field, i, err))
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out[i] = dir + " " + hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}
