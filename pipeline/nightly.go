package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/ingest"
	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
)

// What a night came to (NightResult.Status).
const (
	NightNothingNew = "nothing-new" // no session logged since the cursor
	NightPromoted   = "promoted"    // the candidate passed the gate and serves now
	NightGateFailed = "gate-failed" // nothing promoted
)

// The two arms of a night's evaluation.
const (
	armIncumbent = "promoted"
	armCandidate = "candidate"
)

// Decision is decision.json: the gate's verdict on the night's best
// candidate against the incumbent, written before anything is promoted so
// that a resumed night reaches the same one.
type Decision struct {
	Night     string         `json:"night"`
	Incumbent string         `json:"incumbent"`
	Candidate string         `json:"candidate"`
	Pass      bool           `json:"pass"`
	Reason    string         `json:"reason"`
	Verdicts  []eval.Verdict `json:"verdicts,omitempty"`
	// Sessions is how many sessions the night imported.
	Sessions int `json:"sessions"`
}

// NightResult is what Nightly did.
type NightResult struct {
	Status   string
	Night    string
	Dir      string
	Report   string
	Decision *Decision
	// Resumed is true when the night had begun in an earlier run.
	Resumed bool
}

// nightly is one run of Nightly.
type nightly struct {
	cfg *NightlyConfig
	job *Job
	dir string // the night's directory
	n   Night
}

// Nightly runs one night of the loop (DESIGN.md, The nightly loop): the
// session log since the cursor is imported (redacted), the job is
// optimized from the promoted guideline (Run, seeded with it), the best
// candidate and the incumbent are evaluated on the job's tasks and on
// replayed sessions, gated (eval.Gate) and, when the gate passes,
// promoted into the registry serve reads; then the report is written and
// the cursor moves. Every step is resumable and the decision is durable,
// so a run killed anywhere and run again reaches the same decision and
// promotes at most once.
func Nightly(ctx context.Context, cfg *NightlyConfig) (*NightResult, error) {
	unlock, err := lockState(cfg.State)
	if err != nil {
		return nil, err
	}
	defer unlock()
	job, err := LoadJob(cfg.Job)
	if err != nil {
		return nil, err
	}
	w := &nightly{cfg: cfg, job: job}
	resumed, err := w.begin()
	if err != nil {
		return nil, err
	}
	if w.n.ID == "" {
		return &NightResult{Status: NightNothingNew}, nil
	}
	d, err := w.work(ctx)
	if err != nil {
		return nil, fmt.Errorf("night %s: %w", w.n.ID, err)
	}
	res := &NightResult{Status: NightGateFailed, Night: w.n.ID, Dir: w.dir, Decision: d, Resumed: resumed,
		Report: filepath.Join(w.dir, NightReportFile)}
	if d.Pass {
		res.Status = NightPromoted
	}
	if err := w.writeReport(res); err != nil {
		return nil, err
	}
	return res, w.finish()
}

// work is the night's steps after it began: each returns what an earlier
// run finished when it did.
func (w *nightly) work(ctx context.Context) (*Decision, error) {
	var d Decision
	taken, err := readJSON(filepath.Join(w.dir, DecisionFile), &d)
	if err != nil {
		return nil, err
	}
	if taken {
		slog.Info("nightly: the decision was taken by an earlier run", "night", w.n.ID, "pass", d.Pass)
		return &d, w.promote(&d)
	}
	sessions, err := w.importSessions(ctx)
	if err != nil {
		return nil, err
	}
	killpoint.Reach("after-import")
	cand, err := w.optimize(ctx)
	if err != nil {
		return nil, err
	}
	if d, err = w.decide(ctx, cand, sessions); err != nil {
		return nil, err
	}
	killpoint.Reach("after-gate")
	return &d, w.promote(&d)
}

// begin resumes the night an earlier run began, or begins one on the
// sessions logged since the cursor; w.n stays empty when there are none.
func (w *nightly) begin() (resumed bool, err error) {
	cur := filepath.Join(w.cfg.State, CurrentFile)
	if ok, err := readJSON(cur, &w.n); err != nil || ok {
		w.dir = filepath.Join(w.cfg.State, NightsDir, w.n.ID)
		if ok {
			slog.Info("nightly: resuming the night an earlier run began", "night", w.n.ID)
		}
		return ok, err
	}
	var c Cursor
	if _, err := readJSON(filepath.Join(w.cfg.State, CursorFile), &c); err != nil {
		return false, err
	}
	log := filepath.Join(w.cfg.Sessions, rollout.TrajectoriesFile)
	ino, from, to, err := pending(log, c)
	if err != nil || to == from {
		if err == nil {
			slog.Info("nightly: no new sessions since the cursor; nothing to do", "log", log, "offset", c.Offset, "last_night", c.Night)
		}
		return false, err
	}
	n := Night{File: log, Inode: ino, From: from, To: to, Started: time.Now().UTC().Format(time.RFC3339)}
	if err := w.newNightDir(&n); err != nil {
		return false, err
	}
	if err := copyRange(log, ino, from, to, filepath.Join(w.dir, nightSessions)); err != nil {
		return false, err
	}
	if err := w.fixIncumbent(&n); err != nil {
		return false, err
	}
	w.n = n
	// current.json last: once it exists the night is fixed.
	return false, writeState(cur, n)
}

// newNightDir names the night by the time it begins (a suffix tells two
// nights begun in the same second apart) and makes its directory.
func (w *nightly) newNightDir(n *Night) error {
	base := nightID(time.Now())
	n.ID = base
	for i := 2; ; i++ {
		w.dir = filepath.Join(w.cfg.State, NightsDir, n.ID)
		if _, err := os.Stat(w.dir); errors.Is(err, os.ErrNotExist) {
			break
		}
		n.ID = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("night dir: %w", err)
	}
	return nil
}

// fixIncumbent copies the guideline serve runs now (the registry's
// promoted one, else the job's starting guideline) into the night.
func (w *nightly) fixIncumbent(n *Night) error {
	src, origin, err := StartingGuideline(w.job, guideline.KindHistory)
	if err != nil {
		return invalid(err)
	}
	id, promoted, err := PromotedGuideline(w.cfg.Registry, guideline.KindHistory)
	if err != nil {
		return err
	}
	if id != "" {
		src, origin = promoted, "registry:"+id
	}
	t, err := Compile(guideline.KindHistory, src, origin)
	if err != nil {
		return err
	}
	n.Incumbent, n.IncumbentOrigin = t.ID(), origin
	return writeBytes(filepath.Join(w.dir, nightIncumbent), []byte(t.Source()))
}

// importSessions imports the night's slice of the session log, redacted,
// as a rollout directory (done once: a finished import is kept).
func (w *nightly) importSessions(ctx context.Context) (int, error) {
	out := filepath.Join(w.dir, nightImported)
	if outs, err := rollout.ReadIndex(out); err == nil {
		return len(outs), nil
	}
	rep, err := ingest.Import(ctx, ingest.Options{
		Format: ingest.FormatCtxopt, In: filepath.Join(w.dir, nightSessions), Out: out,
		SkipBad: true, RedactEmails: w.cfg.RedactEmails,
	})
	if err != nil {
		return 0, fmt.Errorf("import sessions: %w", err)
	}
	slog.Info("nightly: imported sessions", "night", w.n.ID, "sessions", rep.Sessions, "bad_lines", rep.BadLines, "redactions", rep.Redactions)
	return rep.Sessions, nil
}

// optimize runs Algorithm 1 (Run) seeded with the incumbent and returns
// the selected guideline's id; the run's final evaluation and export are
// left out (the night evaluates its candidate itself).
func (w *nightly) optimize(ctx context.Context) (string, error) {
	job := *w.job
	job.Compression.History.Guideline = filepath.Join(w.dir, nightIncumbent)
	job.Eval.Disabled = true
	job.Distill.Enabled = false
	sum, err := Run(ctx, &job, filepath.Join(w.dir, nightRun), RunOptions{})
	if err != nil {
		return "", fmt.Errorf("optimize: %w", err)
	}
	return sum.SelectedGuideline, nil
}

// decide evaluates the incumbent and the candidate on the job's tasks and
// the replayed sessions, judges the gate and writes decision.json.
func (w *nightly) decide(ctx context.Context, cand string, sessions int) (Decision, error) {
	d := Decision{Night: w.n.ID, Incumbent: w.n.Incumbent, Candidate: cand, Sessions: sessions}
	if cand == w.n.Incumbent {
		d.Reason = "optimization found no guideline better than the promoted one"
		return d, writeState(filepath.Join(w.dir, DecisionFile), d)
	}
	candFile := filepath.Join(w.dir, nightRun, GuidelinesDir, cand+".tmpl")
	specs, err := eval.ParseSpecs([]string{
		armIncumbent + "=" + string(compress.Guideline) + ",guideline=" + filepath.Join(w.dir, nightIncumbent),
		armCandidate + "=" + string(compress.Guideline) + ",guideline=" + candFile,
	})
	if err != nil {
		return d, err
	}
	opt := EvalOptions{Specs: specs, Split: w.cfg.Split, Samples: 1, Reference: armIncumbent, Replace: true}
	imported := filepath.Join(w.dir, nightImported)
	switch turns, err := loggedTurns(imported); {
	case err != nil:
		return d, err
	case turns:
		opt.Replay, opt.ReplaySample = imported, w.cfg.ReplaySample
	default:
		// Only conversations too short to compress: nothing to replay, and
		// a rule on agreement fails as not measured.
		slog.Warn("nightly: no session has a logged turn; evaluating on the tasks only", "night", w.n.ID)
	}
	evalDir := filepath.Join(w.dir, nightEval)
	res, err := Evaluate(ctx, w.job, opt, evalDir)
	if err != nil {
		return d, fmt.Errorf("evaluate: %w", err)
	}
	if err := report.Write(evalDir, res, "ctxopt nightly "+w.n.ID+": candidate vs promoted", report.Lead{Gate: report.GateOf(w.cfg.rules), Baselines: report.Baselines{PromotedID: w.n.Incumbent, Promoted: armIncumbent}}); err != nil {
		return d, err
	}
	if d.Verdicts, err = eval.Gate(res, armCandidate, res, armIncumbent, w.cfg.rules); err != nil {
		return d, err
	}
	d.Pass, d.Reason = true, "every gate rule holds"
	for _, v := range d.Verdicts {
		if !v.Pass {
			d.Pass, d.Reason = false, "gate rule failed: "+v.Reason
			break
		}
	}
	return d, writeState(filepath.Join(w.dir, DecisionFile), d)
}

// loggedTurns reports whether an imported session has a logged turn
// (serve logs only the turns it folded into a summary).
func loggedTurns(dir string) (bool, error) {
	for t, err := range rollout.Records(filepath.Join(dir, rollout.TrajectoriesFile)) {
		if err != nil {
			return false, fmt.Errorf("imported sessions: %w", err)
		}
		if len(t.Turns) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// promote puts the candidate into serve's registry and promotes it, once:
// promotions.jsonl records the night's promotion, and repeating a cut-off
// promotion (Put and Promote are idempotent) completes it.
func (w *nightly) promote(d *Decision) error {
	if !d.Pass {
		return nil
	}
	done, err := promotedIn(w.cfg.State, w.n.ID)
	if err != nil || done {
		return err
	}
	reg, err := guideline.OpenRegistry(w.cfg.Registry)
	if err != nil {
		return err
	}
	runReg, err := guideline.OpenRegistry(filepath.Join(w.dir, nightRun, GuidelinesDir))
	if err != nil {
		return err
	}
	rec, src, err := runReg.Get(d.Candidate)
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	inc, err := os.ReadFile(filepath.Join(w.dir, nightIncumbent))
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	parent, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: w.n.IncumbentOrigin}, string(inc))
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	put, _, err := reg.Put(guideline.Record{
		Kind: guideline.KindHistory, Parent: parent.ID, Step: rec.Step, Round: rec.Round,
		Source: "nightly:" + w.n.ID, Scores: rec.Scores,
	}, src)
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	killpoint.Reach("promote")
	if _, err := reg.Promote(put.ID); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	slog.Info("nightly: promoted", "night", w.n.ID, "guideline", put.ID, "previous", d.Incumbent)
	return logPromotion(w.cfg.State, Promotion{Night: w.n.ID, Guideline: put.ID, Previous: d.Incumbent, Time: time.Now().UTC().Format(time.RFC3339)})
}

// finish moves the cursor past the night's sessions and closes the night.
func (w *nightly) finish() error {
	c := Cursor{File: w.n.File, Inode: w.n.Inode, Offset: w.n.To, Night: w.n.ID}
	if err := writeState(filepath.Join(w.cfg.State, CursorFile), c); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(w.cfg.State, CurrentFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("close night: %w", err)
	}
	return nil
}
