package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

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
}

const (
	statusRunning = "running"
	statusDone    = "done"
)

// stage runs fn in runDir/stages/name unless a finished manifest there has
// the same inputs. A stage whose inputs changed starts over in a clean dir.
func stage(runDir, name string, inputs any, meter *Meter, fn func(dir string) (map[string]float64, error)) (skipped bool, err error) {
	dir := filepath.Join(runDir, "stages", name)
	in, err := json.Marshal(inputs)
	if err != nil {
		return false, fmt.Errorf("stage %s: encode inputs: %w", name, err)
	}
	sum := sha256.Sum256(in)
	hash := hex.EncodeToString(sum[:])
	mpath := filepath.Join(dir, "manifest.json")
	var old Manifest
	if b, err := os.ReadFile(mpath); err == nil && json.Unmarshal(b, &old) == nil {
		switch {
		case old.InputsHash == hash && old.Status == statusDone:
			slog.Info("stage unchanged, skipped", "stage", name)
			return true, nil
		case old.InputsHash != hash:
			slog.Info("stage inputs changed, starting over", "stage", name)
			if err := os.RemoveAll(dir); err != nil {
				return false, fmt.Errorf("stage %s: %w", name, err)
			}
		default:
			slog.Info("stage was cut off, resuming", "stage", name)
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	m := Manifest{Stage: name, InputsHash: hash, Inputs: in, Status: statusRunning, Started: time.Now().UTC()}
	if err := rollout.WriteJSON(mpath, m); err != nil {
		return false, err
	}
	before := meter.Snapshot()
	counts, err := fn(dir)
	if perr := meter.Persist(); perr != nil && err == nil {
		err = perr
	}
	spent := meter.Snapshot().Sub(before)
	m.LLMCalls, m.CacheHits, m.CostUSD = spent.Calls, spent.CacheHits, spent.CostUSD
	if err != nil {
		_ = rollout.WriteJSON(mpath, m)
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	m.Status, m.Finished, m.Counts = statusDone, time.Now().UTC(), counts
	return false, rollout.WriteJSON(mpath, m)
}
