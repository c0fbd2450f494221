package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/rollout"
)

// RunID names a run on another engine: the run store's URL and the
// resolved job, so a driver started again, on any machine that sees the
// same store, names the same run (and a changed job another).
func RunID(storeURL string, resolvedJob []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", storeURL)
	h.Write(resolvedJob)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// runRemote is Run on another engine: the driver checks the job, puts it
// in the run store, has the engine run it (starting the run's workflow or
// attaching to the running one), then copies the run's files into outDir
// and completes the summary with the run's spend from the ledger.
func runRemote(ctx context.Context, job *Job, outDir string, opts RunOptions) (*RunSummary, error) {
	spec := job.Engine.WithDefaults()
	// Everything the job names is checked here, before any worker sees it;
	// the cache is the workers' (one on this machine may hold it).
	check := *job
	check.Cache.Disabled = true
	rt, err := Open(ctx, &check)
	if err != nil {
		return nil, err
	}
	if err := rt.Close(); err != nil {
		return nil, err
	}
	if err := claimRunDir(outDir, job.Name, opts.Replace); err != nil {
		return nil, err
	}
	resolved, err := job.Resolved()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(outDir, JobFile), resolved, 0o644); err != nil {
		return nil, err
	}
	url, err := RunStoreURL(spec.Storage, outDir)
	if err != nil {
		return nil, invalid(err)
	}
	store, err := OpenRunStore(ctx, url)
	if err != nil {
		return nil, invalid(err)
	}
	defer store.Close()
	if err := store.Put(ctx, JobFile, resolved); err != nil {
		return nil, err
	}
	ledger := OpenLedger(store)
	before, err := ledger.Sum(ctx)
	if err != nil {
		return nil, err
	}
	drv, err := openDriver(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	driven, err := drv.Drive(ctx, RemoteRun{ID: RunID(url, resolved), Store: url, Name: filepath.Base(outDir)})
	if err != nil {
		return nil, err
	}
	return finishRemote(ctx, store, ledger, before, outDir, spec.Storage != "", driven)
}

// finishRemote copies the run's files from the store into outDir (when
// they live elsewhere), writes spent.json from the ledger and completes
// the summary: spent_this_run is every call any process made for the run
// since the driver started.
func finishRemote(ctx context.Context, store *RunStore, ledger *Ledger, before Spend, outDir string, copyFiles bool, driven Driven) (*RunSummary, error) {
	spent, err := ledger.Sum(ctx)
	if err != nil {
		return nil, err
	}
	if copyFiles {
		if _, err := store.Download(ctx, outDir); err != nil {
			return nil, fmt.Errorf("copy the run from %s: %w", store.URL(), err)
		}
	}
	if err := writeShared(ctx, store, outDir, SpentFile, spent); err != nil {
		return nil, err
	}
	if driven.Budget != "" {
		return nil, fmt.Errorf("%w (%s)", ErrBudget, driven.Budget)
	}
	var sum RunSummary
	b, err := os.ReadFile(filepath.Join(outDir, SummaryFile))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil {
		return nil, fmt.Errorf("the run's summary: %w", err)
	}
	sum.Spent, sum.SpentThisRun = spent, spent.Sub(before)
	// The worker's paths were in its own copy of the run directory.
	if sum.Eval != nil {
		sum.Eval.Dir = evalDir(outDir)
	}
	if sum.Dataset != nil && sum.Dataset.Dir != "" {
		sum.Dataset.Dir = filepath.Join(outDir, DatasetsDir)
	}
	slog.Info("run done", "attached", driven.Attached, "requests", spent.Requests)
	return &sum, writeShared(ctx, store, outDir, SummaryFile, &sum)
}

// writeShared writes v as name in outDir and in the store.
func writeShared(ctx context.Context, store *RunStore, outDir, name string, v any) error {
	path := filepath.Join(outDir, name)
	if err := rollout.WriteJSON(path, v); err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return store.Put(ctx, name, b)
}
