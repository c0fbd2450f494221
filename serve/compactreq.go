package serve

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/templates"
)

// AgentCompaction configures the detector of an agent's own compaction
// request: a coding agent that asks the model to summarize the
// conversation so far (Claude Code's /compact and auto-compact, Codex's
// compaction) sends the whole history and a last user message asking for
// a summary. When the detector is on and that message matches, serve
// answers from the summary it already holds for the session, with no
// upstream call; with no summary ready, the request is forwarded as any.
type AgentCompaction struct {
	// Enabled turns the detector on (off by default).
	Enabled bool `yaml:"enabled"`
	// Phrases match, case-insensitively, anywhere in the last user message.
	Phrases []string `yaml:"phrases"`
	// Patterns are regular expressions (Go syntax) matched against it.
	Patterns []string `yaml:"patterns"`
}

// DefaultCompactionPhrases are phrases of the compaction prompts of Claude
// Code and of Codex (codex-rs templates/compact/prompt.md).
var DefaultCompactionPhrases = []string{
	"create a detailed summary of the conversation so far",
	"context checkpoint compaction",
}

// HeaderCompaction is set to "summary" on a compaction request answered
// from the session's summary.
const HeaderCompaction = "X-Ctxopt-Compaction"

func (a AgentCompaction) validate(bad func(field, format string, args ...any)) {
	for i, p := range a.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			bad(fmt.Sprintf("agent_compaction.patterns[%d]", i), "is not a regular expression: %v", err)
		}
	}
	for i, p := range a.Phrases {
		if strings.TrimSpace(p) == "" {
			bad(fmt.Sprintf("agent_compaction.phrases[%d]", i), "is empty, which would match every message")
		}
	}
	if a.Enabled && len(a.Phrases) == 0 && len(a.Patterns) == 0 {
		bad("agent_compaction", "enabled with no phrases and no patterns: nothing can match")
	}
}

// compactionDetector matches compaction requests; nil when off.
type compactionDetector struct {
	phrases  []string // lower case
	patterns []*regexp.Regexp
}

// newCompactionDetector builds the detector of a validated cfg.
func newCompactionDetector(cfg AgentCompaction) *compactionDetector {
	if !cfg.Enabled {
		return nil
	}
	d := &compactionDetector{}
	for _, p := range cfg.Phrases {
		d.phrases = append(d.phrases, strings.ToLower(p))
	}
	for _, p := range cfg.Patterns {
		d.patterns = append(d.patterns, regexp.MustCompile(p))
	}
	return d
}

func (d *compactionDetector) match(text string) bool {
	lower := strings.ToLower(text)
	for _, p := range d.phrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	for _, re := range d.patterns {
		if re.MatchString(text) {
			return true
		}
	}
	return false
}

// lastUserText is the text the user wrote in the last message of conv
// (not its tool results), and false when that message is not a user
// message after the head or was not decoded.
func (c *conversation) lastUserText() (string, bool) {
	last := len(c.raw) - 1
	if c.uncounted || last < c.head || c.role(last) != "user" {
		return "", false
	}
	var parts []string
	for _, m := range c.views[last] {
		if m.Role == "user" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}

// answerCompaction answers conv itself when it is a compaction request
// and the session has a summary: the summary and, verbatim, the turns it
// does not cover yet. It reports whether it answered.
func (s *Server) answerCompaction(w http.ResponseWriter, r *http.Request, conv *conversation, tenant string) bool {
	text, ok := conv.lastUserText()
	if s.detect == nil || !ok || !s.detect.match(text) {
		return false
	}
	cp := s.cfg.Compression
	sp := s.comp.prepareSpan(conv, tenant, cp.KeepLast, cp.keptTokens())
	sess := s.comp.session(sp)
	if sess.Covered == 0 {
		slog.Info("compaction request forwarded: no summary of this session yet", "request_id", requestID(r), "session", sp.id)
		return false
	}
	from := conv.head + sess.Covered
	step := 1
	for _, c := range sp.cuts {
		if c < from {
			step++
		}
	}
	answer, err := templates.Render("serve_compaction.tmpl", map[string]any{
		"summary": strings.TrimSpace(sess.Summary),
		"recent":  strings.TrimSpace(compress.FormatHistory(conv.flat(from, len(conv.raw)-1), step)),
	})
	if err != nil {
		slog.Warn("compaction request forwarded", "request_id", requestID(r), "session", sp.id, "err", err)
		return false
	}
	answer = strings.TrimSpace(answer)
	if x := exchangeOf(r.Context()); x != nil {
		x.tenant = tenant
	}
	out := s.tok.Count(answer)
	s.lim.spend(tenant, int64(out))
	s.m.compactionAnswered.Inc()
	h := w.Header()
	h.Set(HeaderCompaction, "summary")
	h.Set(HeaderSession, sp.id)
	h.Set(HeaderGuideline, sess.GuidelineID)
	h.Set(HeaderBackend, sess.Link)
	h.Set(HeaderTokensSent, strconv.Itoa(0))
	slog.Info("compaction request answered from the summary", "request_id", requestID(r), "session", sp.id,
		"summary_covers", sess.Covered, "tokens", out)
	writeAnswer(w, conv, requestID(r), answer, out)
	return true
}
