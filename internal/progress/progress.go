// Package progress reports the progress of long work: a bar on a terminal,
// structured log lines otherwise.
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

	mu      sync.Mutex
	done    int
	lastLog time.Time
	every   time.Duration
}

// New starts reporting on total units of work.
func New(label string, total int) *Progress {
	p := &Progress{label: label, total: total, every: 5 * time.Second, lastLog: time.Now()}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	} else {
		slog.Info("started", "work", label, "total", total)
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
	if time.Since(p.lastLog) >= p.every || p.done == p.total {
		p.lastLog = time.Now()
		slog.Info("progress", "work", p.label, "done", p.done, "total", p.total)
	}
}

// Finish ends the report.
func (p *Progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
