package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"gopkg.in/yaml.v3"
)

// newRunner checks everything the job names, then prepares the run
// directory. The caller closes p.rt.
func newRunner(ctx context.Context, job *Job, outDir string, opts RunOptions) (p *runner, err error) {
	started := time.Now()
	if !job.Compression.History.Enabled && !job.Compression.Observation.Enabled {
		return nil, invalid(errors.New("the job enables neither compression.history nor compression.observation: nothing to optimize"))
	}
	// Everything the job names is checked before the run directory exists.
	rt, err := Open(ctx, job)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	p = &runner{ctx: ctx, job: job, rt: rt, dir: outDir, started: started, tmpls: map[string]*guideline.Template{}}
	if err := p.loadStart(); err != nil {
		return nil, err
	}
	if err := p.openDir(opts.Replace); err != nil {
		return nil, err
	}
	if !opts.NoReuse && !job.Cache.Disabled {
		p.store = &StageStore{dir: StageStoreDir(CachePath(job.Cache.Path))}
	}
	p.engine = inProcess{}
	p.wrapClients()
	return p, nil
}

// wrapClients meters the roles the stages call.
func (p *runner) wrapClients() {
	rt := p.rt
	p.agent, p.compressor, p.optimizer, p.embedder = p.meter.Wrap(rt.Agent), p.meter.Wrap(rt.Compressor), p.meter.Wrap(rt.Optimizer), p.meter.Wrap(rt.Embedder)
}

// loadStart reads the train split and compiles the starting guidelines:
// P(0) of the kind optimized, and the other kind's, which it keeps
// throughout.
func (p *runner) loadStart() error {
	train, err := p.rt.Tasks("train")
	if err != nil {
		return invalid(err)
	}
	kind, otherKind := guideline.KindHistory, guideline.KindObservation
	if !p.job.Compression.History.Enabled {
		kind, otherKind = otherKind, kind
	}
	seedSrc, seedOrigin, err := StartingGuideline(p.job, kind)
	if err != nil {
		return invalid(err)
	}
	start, err := Compile(kind, seedSrc, seedOrigin)
	if err != nil {
		return invalid(err)
	}
	other, err := StartingCompiled(p.job, otherKind)
	if err != nil {
		return invalid(err)
	}
	p.train, p.kind, p.other, p.seedSrc, p.seedOrigin = train, kind, other, seedSrc, seedOrigin
	p.keep(seedSrc, start)
	return nil
}

// openDir claims the run directory and opens what the run keeps there:
// the resolved job, the guideline registry, the malformed replies and the
// spend ledger.
func (p *runner) openDir(replace bool) error {
	outDir := p.dir
	if err := claimRunDir(outDir, p.job.Name, replace); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	// Temporary files of a run killed mid-write would otherwise stay.
	if n, err := atomicfile.SweepStale(outDir, atomicfile.StaleAfter); err != nil {
		slog.Warn("could not remove stale temporary files", "dir", outDir, "err", err)
	} else if n > 0 {
		slog.Info("removed temporary files left by an interrupted run", "dir", outDir, "count", n)
	}
	resolved, err := p.job.Resolved()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(outDir, JobFile), resolved, 0o644); err != nil {
		return err
	}
	return p.openRecords()
}

// openRecords opens the guideline registry, the malformed replies and the
// spend of the run directory.
func (p *runner) openRecords() (err error) {
	if p.reg, err = guideline.OpenRegistry(filepath.Join(p.dir, GuidelinesDir)); err != nil {
		return err
	}
	if err := p.rt.RecordMalformed(filepath.Join(p.dir, MalformedFile)); err != nil {
		return err
	}
	p.meter, err = NewMeter(p.job.Budget, filepath.Join(p.dir, SpentFile))
	return err
}

// claimRunDir refuses an outDir whose job.yaml names another job: its
// stages, registry, spending and reports would mix with this job's. With
// replace it removes such a directory instead. A run of the same job is
// resumed, whatever changed: stages whose inputs changed run again.
func claimRunDir(outDir, name string, replace bool) error {
	path := filepath.Join(outDir, JobFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	var other struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(b, &other); err == nil && other.Name == name {
		return nil
	}
	if !replace {
		return invalid(fmt.Errorf("%s holds a run of another job (%s names %q, this job is %q); choose another --out, or pass --replace to remove it and start over", outDir, path, other.Name, name))
	}
	slog.Info("replacing the run of another job", "dir", outDir, "job", other.Name)
	if err := os.RemoveAll(outDir); err != nil {
		return fmt.Errorf("replace %s: %w", outDir, err)
	}
	return nil
}

// boundStore evicts the least recently used entries of the stage store
// beyond the job's bound, keeping every entry this run used or stored.
func (p *runner) boundStore() {
	if p.store == nil {
		return
	}
	limit, err := p.job.Cache.StagesMaxBytes()
	if err != nil || limit < 0 {
		return // invalid bounds are rejected with the job
	}
	res, err := PruneStageStore(p.store.dir, 0, limit, p.started)
	if err != nil {
		slog.Warn("stage store not bounded", "dir", p.store.dir, "err", err)
	}
	if res.Removed > 0 || res.Temps > 0 {
		slog.Info("stage store bounded", "dir", p.store.dir, "evicted", res.Removed, "stale_temps", res.Temps, "bytes", res.BytesAfter, "limit", limit)
	}
}
