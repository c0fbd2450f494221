// Package progress reports the progress of long work: a bar on a terminal,
// structured log lines otherwise. Without a terminal (make, CI) a piece of
// work logs one line at Info when it ends; its start and the periodic
// counts are Debug, so a run's log stays a line per stage.
package progress

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Progress counts finished units of work. It is safe for concurrent use.
type Progress struct {
	label string
	total int
	bar   *progressbar.ProgressBar

	mu       sync.Mutex
	done     int
	start    time.Time
	lastLog  time.Time
	every    time.Duration
	finished bool
}

// New starts reporting on total units of work.
func New(label string, total int) *Progress {
	now := time.Now()
	p := &Progress{label: label, total: total, every: 5 * time.Second, start: now, lastLog: now}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	} else {
		slog.Debug("started", "work", label, "total", total)
	}
	return p
}

// Add records n more finished units.
func (p *Progress) Add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if time.Since(p.lastLog) >= p.every {
		p.lastLog = time.Now()
		slog.Debug("progress", "work", p.label, "done", p.done, "total", p.total)
	}
}

// Finish ends the report. Without a terminal it logs what was done, once,
// unless there was nothing to do (a stage an earlier run finished).
func (p *Progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.total == 0 {
		return
	}
	p.finished = true
	msg := "finished"
	if p.done < p.total {
		msg = "stopped"
	}
	slog.Info(msg, "work", p.label, "done", p.done, "total", p.total, "elapsed", time.Since(p.start).Round(100*time.Millisecond))
}
