package serve

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/rollout"
)

// SessionLogFile is the name of the session log in session_log.dir: the
// rollouts' file name, so optimize distill --run finds it.
const SessionLogFile = rollout.TrajectoriesFile

// SessionSplit is the split of session-log trajectories.
const SessionSplit = "serve"

// maxEventsPerSession bounds what a session holds in memory before its
// record is written.
const maxEventsPerSession = 256

// sessionLog writes each session, redacted, as one trajectory record
// (linear in its length: the compression events, each turn once) when its
// outcome is reported, when it has been idle for ttl, or at shutdown.
type sessionLog struct {
	ttl time.Duration
	red *redact.Redactor
	now func() time.Time

	mu   sync.Mutex
	f    *os.File
	open map[string]*openSession
}

type openSession struct {
	traj *rollout.Trajectory
	last time.Time
}

func openSessionLog(cfg SessionLog, ttl time.Duration) (*sessionLog, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("session_log.dir: %w", err)
	}
	path := filepath.Join(cfg.Dir, SessionLogFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session_log.dir: %w", err)
	}
	// A server killed mid-write may have left a last line without its
	// newline: ended when it is a whole record, cut off when torn, or the
	// next record would be glued to it and both lost to readers. Damage
	// elsewhere is left for the readers to name.
	line, cut, err := jsonl.Mend(f, rollout.RecordLimits)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("session_log.dir: %w", err)
	}
	switch {
	case cut:
		slog.Warn("session log: cut off its torn last line (the server stopped mid-write)", "file", path, "line", line)
	case line > 0:
		slog.Info("session log: ended its last record with the newline it lacked", "file", path, "line", line)
	}
	return &sessionLog{ttl: ttl, red: redact.New(cfg.RedactEmails), now: time.Now, f: f, open: map[string]*openSession{}}, nil
}

func (l *sessionLog) clean(s string) string {
	out, _ := l.red.Redact(s)
	return out
}

func (l *sessionLog) cleanMessages(ms []llm.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		m.Content = l.clean(m.Content)
		m.ToolCalls = append([]llm.ToolCall(nil), m.ToolCalls...)
		for j := range m.ToolCalls {
			m.ToolCalls[j].Arguments = l.clean(m.ToolCalls[j].Arguments)
		}
		out[i] = m
	}
	return out
}

// record adds one compression of sp to its session.
func (l *sessionLog) record(sp *span, in compress.Input, res compress.Output, guidelineID, link string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked()
	o, ok := l.open[sp.id]
	if !ok {
		o = &openSession{traj: &rollout.Trajectory{
			// The task id is the session id (the X-Ctxopt-Session header),
			// so optimize import --labels can key outcomes by it.
			TaskID: sp.id, Split: SessionSplit, Strategy: string(compress.Guideline),
			HistoryGuidelineID: guidelineID, Task: l.clean(in.Task),
		}}
		l.open[sp.id] = o
	}
	o.last = l.now()
	t := o.traj
	// Each folded turn is logged once: the assistant message and what
	// answered it.
	hist := in.History[in.Covered:res.Covered]
	for i := 0; i < len(hist); i++ {
		if hist[i].Role != "assistant" {
			continue
		}
		turn := rollout.Turn{Step: len(t.Turns) + 1, Output: l.cleanMessages(hist[i : i+1])[0]}
		for i+1 < len(hist) && hist[i+1].Role != "assistant" {
			i++
			turn.Observation += l.clean(hist[i].Content)
		}
		t.Turns = append(t.Turns, turn)
	}
	if res.Event != nil && len(t.Events) < maxEventsPerSession {
		e := *res.Event
		e.Step = len(t.Turns)
		e.Vars = make(map[string]string, len(res.Event.Vars))
		for k, v := range res.Event.Vars {
			e.Vars[k] = l.clean(v)
		}
		e.Input = l.cleanMessages(e.Input)
		e.Output = l.clean(e.Output)
		t.Events = append(t.Events, e)
		t.CompressorModel = e.Model
		t.Metrics.CompressorCalls++
		t.Metrics.CompressorInputTokens += e.Usage.PromptTokens
		t.Metrics.CompressorOutputTokens += e.Usage.CompletionTokens
	}
	t.Metrics.Steps = len(t.Turns)
	if link == LinkTruncation {
		t.Strategy = string(compress.Guideline) + "+" + LinkTruncation
	}
}

// outcome writes session id with its reported outcome; false when the log
// holds no such session.
func (l *sessionLog) outcome(id string, success bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.open[id]
	if !ok {
		return false
	}
	o.traj.Success = success
	o.traj.Score.Success = success
	l.writeLocked(id)
	return true
}

// expireLocked writes the sessions idle for ttl, outcome unknown (not a
// success, so distill leaves them out).
func (l *sessionLog) expireLocked() {
	for id, o := range l.open {
		if l.now().Sub(o.last) > l.ttl {
			l.writeLocked(id)
		}
	}
}

func (l *sessionLog) writeLocked(id string) {
	o := l.open[id]
	delete(l.open, id)
	// The rollouts' record format: linear in the session's length.
	b, err := rollout.EncodeTrajectory(o.traj)
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err != nil {
		slog.Warn("session log write", "session", id, "err", err)
	}
}

// close writes every open session and closes the file.
func (l *sessionLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.open {
		l.writeLocked(id)
	}
	return l.f.Close()
}
