package distill

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sourcegraph/conc/stream"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// Options shape a build. Zero values take the defaults noted.
type Options struct {
	// Seed orders tasks for the split (0 means 42, the papers' seed).
	Seed int
	// ValidationFraction is the share of tasks in the validation split, in
	// [0, 1) (CheckValidationFraction): 0 puts every task in train. Nil
	// means DefaultValidationFraction.
	ValidationFraction *float64
	// MaxLength drops rows whose input and output tokens exceed it (0 means
	// 10000, the distillation sequence length of ACON D.3).
	MaxLength int
	// RedactEmails also replaces e-mail addresses.
	RedactEmails bool
	// SkipBad skips unreadable trajectory lines, counting them in the
	// manifest, instead of failing on the first.
	SkipBad bool
	// RowGroupRows bounds Parquet row groups (0 means 1000).
	RowGroupRows int
	// Guideline keeps only events whose guideline id starts with it. When
	// empty, the run's summary.json selected_guideline is used if there is
	// one, else every event is kept.
	Guideline string
	// JobName names the job in the card; empty means job.yaml's name.
	JobName string
	// Trajectories, when set, are the files to read instead of every
	// trajectories.jsonl under the run directory.
	Trajectories []string
	// Synth are PAACE-Syn runs (optimize synth run's output directories or
	// their executions.jsonl) whose accepted compressions become rows of
	// kind paace, read after the trajectories. The guideline filter does
	// not apply to them: each run has its one teacher.
	Synth []string
	// License is the card's license identifier (empty means "other": the
	// teacher's outputs are subject to its provider's terms).
	License string
	// LicenseLink is a URL or path of the license text, for the card
	// (default: the text of a well-known License, e.g. apache-2.0).
	LicenseLink string
	// Concurrency bounds the goroutines that decode and redact (0 means
	// GOMAXPROCS).
	Concurrency int
}

// Defaults of Options.
const (
	DefaultSeed               = 42
	DefaultValidationFraction = 0.1
	DefaultMaxLength          = 10000
)

// CheckValidationFraction is the one rule for a validation fraction, which
// the job file and the command line apply too: a share of the tasks in
// [0, 1), 0 for no validation split (1 would leave train no task).
func CheckValidationFraction(f float64) error {
	if !(f >= 0 && f < 1) {
		return fmt.Errorf("%g is out of range; want a share of tasks in [0, 1) (0: no validation split)", f)
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.ValidationFraction == nil {
		o.ValidationFraction = new(float64(DefaultValidationFraction))
	}
	if err := CheckValidationFraction(*o.ValidationFraction); err != nil {
		return o, fmt.Errorf("validation fraction: %w", err)
	}
	if o.MaxLength == 0 {
		o.MaxLength = DefaultMaxLength
	}
	if o.MaxLength < 0 {
		return o, fmt.Errorf("max length %d: want a positive token count", o.MaxLength)
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = defaultRowGroupRows
	}
	if o.License == "" {
		o.License = "other"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	return o, nil
}

const manifestName = "manifest.json"

// Build reads the trajectories of a run, curates the teacher's compressions
// into rows and writes the dataset into outDir: data files per split, the
// dataset card, the recipes and manifest.json. Everything is written into a
// temporary directory next to outDir that replaces it only when complete, so
// a failed build leaves no partial output. An existing outDir is replaced
// only if it holds a previous build.
//
// Bad input is reported as ErrNoData (nothing to train on) or *LineError (an
// unreadable trajectory line, unless opts.SkipBad).
func Build(ctx context.Context, runDir, outDir string, opts Options) (Manifest, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Manifest{}, err
	}
	m := newManifest()
	m.License, m.LicenseLink = opts.License, licenseLink(opts.License, opts.LicenseLink)
	m.Options = ManifestOptions{
		Seed:               opts.Seed,
		ValidationFraction: *opts.ValidationFraction,
		MaxLength:          opts.MaxLength,
		RedactEmails:       opts.RedactEmails,
		SkipBad:            opts.SkipBad,
		RowGroupRows:       opts.RowGroupRows,
	}
	if err := resolveRun(runDir, &opts, &m); err != nil {
		return m, err
	}
	if err := checkOutDir(outDir); err != nil {
		return m, err
	}
	parent := filepath.Dir(filepath.Clean(outDir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return m, fmt.Errorf("create output parent: %w", err)
	}
	// A build killed before its rename left its temporary directory.
	base := filepath.Base(filepath.Clean(outDir))
	if err := atomicfile.RemoveStale(parent, base); err != nil {
		return m, fmt.Errorf("remove stale temporary output: %w", err)
	}
	tmp, err := atomicfile.MkdirTemp(parent, base)
	if err != nil {
		return m, fmt.Errorf("create temporary output: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()

	tok, err := llm.NewTokenizer("")
	if err != nil {
		return m, err
	}
	spoolPath := filepath.Join(tmp, ".rows.gob")
	tasks, err := curateAll(ctx, runDir, spoolPath, newCurator(opts, tok, m.Guideline), opts, &m)
	if err != nil {
		return m, err
	}
	if m.Rows.Kept == 0 {
		return m, noDataError(runDir, &m)
	}
	splits := assignSplits(tasks, opts.Seed, *opts.ValidationFraction)
	stats, err := writeSpool(ctx, spoolPath, tmp, splits, opts)
	if err != nil {
		return m, err
	}
	if err := os.Remove(spoolPath); err != nil {
		return m, fmt.Errorf("remove row spool: %w", err)
	}
	m.Splits = stats.Splits
	if err := writeCard(tmp, &m); err != nil {
		return m, err
	}
	if err := writeRecipes(tmp, &m); err != nil {
		return m, err
	}
	if m.Files, err = listFiles(tmp); err != nil {
		return m, err
	}
	data, err := m.marshal()
	if err != nil {
		return m, err
	}
	if err := os.WriteFile(filepath.Join(tmp, manifestName), data, 0o644); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	if err := syncTree(tmp); err != nil {
		return m, err
	}
	if err := replaceDir(tmp, outDir); err != nil {
		return m, err
	}
	done = true
	return m, nil
}

// resolveRun fills in the inputs, job name and guideline filter.
func resolveRun(runDir string, opts *Options, m *Manifest) error {
	files := opts.Trajectories
	if len(files) == 0 {
		if runDir == "" && len(opts.Synth) == 0 {
			return errors.New("no run directory, trajectory files or synth runs given")
		}
		if runDir != "" {
			var err error
			if files, err = findTrajectories(runDir); err != nil {
				return err
			}
			if len(files) == 0 && len(opts.Synth) == 0 {
				if fi, err := os.Stat(runDir); err == nil && !fi.IsDir() {
					return fmt.Errorf("%w: %s is a file; give a run or rollout output directory (or the file as a trajectory file)", ErrNoData, runDir)
				}
				return fmt.Errorf("%w: no %s under %s (is it a run or rollout output directory?)", ErrNoData, rollout.TrajectoriesFile, runDir)
			}
		}
	}
	opts.Trajectories = files

	m.Job = opts.JobName
	if m.Job == "" && runDir != "" {
		name, err := readRunName(runDir)
		if err != nil {
			// The name only labels the card; a job.yaml other code
			// cannot parse is reported there.
			slog.Warn("distill: job name unknown", "err", err)
		}
		m.Job = name
	}
	switch {
	case opts.Guideline != "":
		m.Guideline, m.GuidelineFrom = opts.Guideline, "flag"
	case runDir != "":
		selected, err := readSelectedGuideline(runDir)
		if err != nil {
			return err
		}
		if selected != "" {
			m.Guideline, m.GuidelineFrom = selected, "summary"
		}
	}
	return nil
}

// checkOutDir refuses to replace a directory that is not a previous build:
// a mistyped --out must not delete someone's files.
func checkOutDir(outDir string) error {
	if outDir == "" {
		return errors.New("no output directory given")
	}
	fi, err := os.Stat(outDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory", outDir)
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(outDir, manifestName))
	if err == nil {
		var prev struct {
			Format string `json:"format"`
		}
		if json.Unmarshal(data, &prev) == nil && prev.Format == ManifestFormat {
			return nil
		}
	}
	return fmt.Errorf("output %s is not empty and holds no dataset written by optimize distill; choose a new directory or empty it", outDir)
}

// curateAll reads every input, curates its events and spools the kept rows
// to spoolPath. It returns the tasks of the kept rows. Decoding and
// preparing run concurrently per trajectory; admission and spooling run in
// input order, so the first of duplicates is kept and the spool's order is
// the input's.
func curateAll(ctx context.Context, runDir, spoolPath string, c *curator, opts Options, m *Manifest) ([]string, error) {
	spool, err := os.Create(spoolPath)
	if err != nil {
		return nil, fmt.Errorf("create row spool: %w", err)
	}
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, 1<<20)
	enc := gob.NewEncoder(bw)

	st := &curateState{m: m, c: c, enc: enc, tasks: map[string]struct{}{}, guidelines: map[string]struct{}{}, models: map[string]struct{}{}, sources: map[string]struct{}{}}
	for _, path := range opts.Trajectories {
		if err := st.readFile(ctx, runDir, path, opts); err != nil {
			return nil, err
		}
	}
	for _, path := range opts.Synth {
		if err := st.readSynth(ctx, runDir, path, opts); err != nil {
			return nil, err
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write row spool: %w", err)
	}
	if err := spool.Close(); err != nil {
		return nil, fmt.Errorf("write row spool: %w", err)
	}
	m.GuidelineIDs = sortedKeys(st.guidelines)
	m.TeacherModels = sortedKeys(st.models)
	m.Sources = sortedKeys(st.sources)
	return sortedKeys(st.tasks), nil
}

type curateState struct {
	m   *Manifest
	c   *curator
	enc *gob.Encoder

	tasks, guidelines, models, sources map[string]struct{}

	mu  sync.Mutex
	err error // first error of a callback; stops reading
}

func (st *curateState) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
	}
}

func (st *curateState) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// prepared is the result of the concurrent stage for one trajectory line.
type prepared struct {
	rec        trajectoryRecord
	candidates []candidate
	err        error
}

func (st *curateState) readFile(ctx context.Context, runDir, path string, opts Options) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open trajectories: %w", err)
	}
	defer f.Close()
	in := InputFile{Path: displayPath(runDir, path)}
	lr := newLineReader(f, path)
	s := stream.New().WithMaxGoroutines(opts.Concurrency)
	var readErr error
	for {
		if readErr = ctx.Err(); readErr != nil {
			break
		}
		if st.failure() != nil {
			break
		}
		line, lineNo, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("read %s: %w", path, err)
			break
		}
		torn := lr.rd.Torn()
		s.Go(func() stream.Callback {
			p := st.prepare(line)
			if p.err != nil && torn {
				// A write cut short (a killed rollout): the record was never
				// finished, so it is left out, as every reader does.
				return func() { jsonl.WarnTorn(path, lineNo, p.err) }
			}
			return func() { st.admit(path, lineNo, p, opts.SkipBad, &in) }
		})
	}
	s.Wait()
	if readErr != nil {
		return readErr
	}
	if err := st.failure(); err != nil {
		return err
	}
	in.Lines = lr.line
	in.SHA256 = lr.sum()
	st.m.Inputs = append(st.m.Inputs, in)
	return nil
}

func (st *curateState) prepare(line []byte) prepared {
	rec, err := decodeTrajectory(line)
	if err != nil {
		return prepared{err: err}
	}
	p := prepared{rec: rec, candidates: make([]candidate, len(rec.Events))}
	for i := range rec.Events {
		p.candidates[i] = st.c.prepare(&p.rec, &rec.Events[i])
	}
	// The events' text is in the candidates now; drop the decoded copy.
	p.rec.Events = nil
	return p
}

// admit runs on the stream's callback goroutine, in input order.
func (st *curateState) admit(path string, lineNo int, p prepared, skipBad bool, in *InputFile) {
	if st.failure() != nil {
		return
	}
	m := st.m
	if p.err != nil {
		if !skipBad {
			st.fail(&LineError{File: path, Line: lineNo, Err: fmt.Errorf("%w (rerun with --skip-bad to skip such lines)", p.err)})
			return
		}
		in.BadLines++
		m.Trajectories.BadLines++
		if len(m.BadLines) < maxBadLines {
			m.BadLines = append(m.BadLines, LineRef{File: in.Path, Line: lineNo, Error: p.err.Error()})
		}
		return
	}
	in.Trajectories++
	m.Trajectories.Read++
	switch {
	case p.rec.Infra:
		m.Trajectories.Infra++
	case p.rec.Success:
		m.Trajectories.Successful++
	default:
		m.Trajectories.Failed++
	}
	for i := range p.candidates {
		if !st.admitRow(&p.candidates[i]) {
			return
		}
	}
}

// admitRow counts one candidate row and spools it when it is kept; false
// when spooling failed (st.failure says why).
func (st *curateState) admitRow(cand *candidate) bool {
	m := st.m
	m.Rows.Read++
	addCounts(m.Redactions, cand.redactions)
	if reason := st.c.admit(cand); reason != "" {
		m.Rows.Dropped[reason]++
		return true
	}
	if err := st.enc.Encode(&cand.row); err != nil {
		st.fail(fmt.Errorf("write row spool: %w", err))
		return false
	}
	m.Rows.Kept++
	if slices.ContainsFunc(cand.row.Prompt, func(msg Message) bool { return msg.Role == "system" }) {
		m.Rows.WithSystem++
	}
	st.tasks[cand.row.TaskID] = struct{}{}
	st.guidelines[cand.row.GuidelineID] = struct{}{}
	st.models[cand.row.TeacherModel] = struct{}{}
	st.sources[cand.row.Source] = struct{}{}
	return true
}

// displayPath names an input relative to the run directory when it is
// inside it, so the manifest does not depend on where the run lives.
func displayPath(runDir, path string) string {
	if runDir != "" {
		if rel, err := filepath.Rel(runDir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(path)
}

func noDataError(runDir string, m *Manifest) error {
	where := runDir
	if where == "" {
		where = fmt.Sprintf("%d trajectory files", len(m.Inputs))
	}
	var dropped []string
	for _, r := range DropReasons() {
		if n := m.Rows.Dropped[r]; n > 0 {
			dropped = append(dropped, fmt.Sprintf("%s %d", r, n))
		}
	}
	detail := fmt.Sprintf("%d trajectories read (%d successful, %d failed, %d infra), %d compression events",
		m.Trajectories.Read, m.Trajectories.Successful, m.Trajectories.Failed, m.Trajectories.Infra, m.Rows.Read)
	if len(dropped) > 0 {
		detail += "; dropped: " + strings.Join(dropped, ", ")
	}
	hint := "run a compressed rollout in which some tasks succeed"
	if m.Guideline != "" {
		hint = fmt.Sprintf("check that guideline %q (from %s) is the one the compressed rollouts used", m.Guideline, m.GuidelineFrom)
	}
	return fmt.Errorf("%w in %s: %s; %s", ErrNoData, where, detail, hint)
}

// assignSplits puts whole tasks into splits: a task goes to validation
// when a hash of the seed and its id, read as a fraction of 2⁶⁴, is below
// fraction. The split of a task depends on nothing else (not on the other
// tasks, not on input order, not on Go's random generators), so it keeps
// its split when sources are added or removed, across re-runs and
// versions. A small run may have no validation task.
func assignSplits(tasks []string, seed int, fraction float64) map[string]string {
	splits := make(map[string]string, len(tasks))
	for _, t := range tasks {
		splits[t] = SplitTrain
		if fraction > 0 && splitDraw(seed, t) < fraction {
			splits[t] = SplitValidation
		}
	}
	return splits
}

// splitDraw is a task's uniform draw in [0, 1).
func splitDraw(seed int, task string) float64 {
	h := sha256.Sum256([]byte(strconv.Itoa(seed) + "\x00" + task))
	return float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53)
}

// writeSpool writes the spooled rows, in spool order, into dir.
func writeSpool(ctx context.Context, spoolPath, dir string, splits map[string]string, opts Options) (WriterStats, error) {
	f, err := os.Open(spoolPath)
	if err != nil {
		return WriterStats{}, fmt.Errorf("open row spool: %w", err)
	}
	defer f.Close()
	w, err := NewWriter(dir, WriterOptions{RowGroupRows: opts.RowGroupRows})
	if err != nil {
		return WriterStats{}, err
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	var werr error
	for werr == nil {
		if werr = ctx.Err(); werr != nil {
			break
		}
		var r Row
		if err := dec.Decode(&r); err != nil {
			if !errors.Is(err, io.EOF) {
				werr = fmt.Errorf("read row spool: %w", err)
			}
			break
		}
		r.Split = splits[r.TaskID]
		werr = w.Write(r)
	}
	stats, cerr := w.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return stats, err
	}
	return stats, nil
}

// syncTree flushes every file and directory under dir to disk, so the
// rename that publishes it never exposes data still in the page cache only.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
		return nil
	})
}

// replaceDir moves tmp to outDir, replacing a previous build there.
func replaceDir(tmp, outDir string) error {
	if _, err := os.Stat(outDir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, outDir); err != nil {
			return fmt.Errorf("publish dataset: %w", err)
		}
		return nil
	}
	old := tmp + ".old"
	if err := os.Rename(outDir, old); err != nil {
		return fmt.Errorf("move previous dataset aside: %w", err)
	}
	if err := os.Rename(tmp, outDir); err != nil {
		// Put the previous build back rather than leave nothing.
		if rerr := os.Rename(old, outDir); rerr != nil {
			return fmt.Errorf("publish dataset: %w (previous dataset left at %s)", err, old)
		}
		return fmt.Errorf("publish dataset: %w", err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove previous dataset: %w", err)
	}
	return nil
}

func sortedKeys(set map[string]struct{}) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
