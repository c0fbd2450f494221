// Package ingest turns existing agent logs into trajectory records that
// the contrastive and distill stages read like rollouts (docs/import.md):
// OpenAI chat completion logs, ctxopt's own session logs, or any JSONL log
// through a mapping of gjson paths. Secrets are redacted on the way in,
// with the project's one redaction (package redact).
package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/rollout"
)

// Formats.
const (
	FormatOpenAIChat = "openai-chat"
	FormatCtxopt     = "ctxopt"
	FormatMapping    = "mapping"
)

// Strategy is the strategy name imported trajectories carry.
const Strategy = "imported"

// GuidelineID marks the compression events of imported logs.
const GuidelineID = "imported"

// Options configure an import.
type Options struct {
	Format string
	// In is the log file (JSONL); Out the directory to write.
	In, Out string
	// Mapping is the mapping file (format mapping).
	Mapping string
	// Labels is an optional JSONL file of {"session": ID, "success": bool}
	// that overrides the outcomes in the log.
	Labels string
	// SkipBad skips unreadable lines, counting them, instead of failing.
	SkipBad bool
	// RedactEmails also redacts e-mail addresses.
	RedactEmails bool
	// LossyUTF8 replaces invalid UTF-8 with U+FFFD, counted
	// (Report.Replaced), instead of refusing the log.
	LossyUTF8 bool
	// MaxSessionCalls, MaxMessages and MaxDepth bound the calls of one
	// session, the messages of one call and the JSON nesting of one line
	// (0: the defaults below).
	MaxSessionCalls, MaxMessages, MaxDepth int
}

// Default limits of an import (docs/import.md, README's Limits). A session
// longer than MaxSessionCalls is refused, not split: its halves would be
// scored as two tasks with one outcome.
const (
	DefaultMaxSessionCalls = 10_000
	DefaultMaxMessages     = 10_000
	DefaultMaxDepth        = 64
)

func (o Options) withDefaults() Options {
	if o.MaxSessionCalls == 0 {
		o.MaxSessionCalls = DefaultMaxSessionCalls
	}
	if o.MaxMessages == 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	return o
}

// limits are the line limits of the log opts names.
func (o Options) limits() jsonl.Limits {
	lim := rollout.RecordLimits
	lim.Depth, lim.DepthSetting, lim.LossyUTF8 = o.MaxDepth, "--max-depth", o.LossyUTF8
	return lim
}

// limitError is a log over one of the import's limits: refused even with
// SkipBad, which skips damaged lines, not large ones.
type limitError struct{ err error }

func (e limitError) Error() string { return e.err.Error() }
func (e limitError) Unwrap() error { return e.err }

// Report says what an import read and wrote.
type Report struct {
	Lines    int `json:"lines"`
	BadLines int `json:"bad_lines"`
	Calls    int `json:"calls"`
	Sessions int `json:"sessions"`
	Labeled  int `json:"labeled"`
	// Replaced counts the invalid UTF-8 bytes LossyUTF8 replaced.
	Replaced   int            `json:"replaced_invalid_utf8,omitempty"`
	Redactions map[string]int `json:"redactions,omitempty"`
	Summary    rollout.Summary
}

// LineError is a log line that could not be read.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrInvalidInput marks errors in what the user gave (flags, files).
var ErrInvalidInput = errors.New("invalid input")

type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{ErrInvalidInput, e.err} }

// invalid marks an error as the input's fault; its message is unchanged.
func invalid(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

// Import reads opts.In and writes the trajectories into opts.Out, a
// rollout directory, only when every line was read (or skipped with
// SkipBad).
func Import(ctx context.Context, opts Options) (Report, error) {
	var rep Report
	opts = opts.withDefaults()
	if opts.MaxSessionCalls < 0 || opts.MaxMessages < 0 || opts.MaxDepth < 0 {
		return rep, invalid("--max-session-calls, --max-messages and --max-depth: want a positive limit")
	}
	red := &redactor{r: redact.New(opts.RedactEmails), counts: map[string]int{}}
	var labels map[string]bool
	if opts.Labels != "" {
		var err error
		if labels, err = readLabels(opts.Labels); err != nil {
			return rep, err
		}
	}
	var trajs iter.Seq2[*rollout.Trajectory, error]
	switch opts.Format {
	case FormatOpenAIChat, FormatMapping:
		m := openAIChat
		if opts.Format == FormatMapping {
			if opts.Mapping == "" {
				return rep, invalid("--format mapping needs --mapping FILE")
			}
			var err error
			if m, err = LoadMapping(opts.Mapping); err != nil {
				return rep, inputError{err}
			}
		}
		idx, err := indexSessions(ctx, opts, m, &rep)
		if err != nil {
			return rep, err
		}
		trajs = idx.trajectories(ctx, m, opts, red, labels, &rep)
	case FormatCtxopt:
		trajs = ctxoptRecords(ctx, opts, red, labels, &rep)
	default:
		return rep, invalid("--format %q: want openai-chat, ctxopt or mapping", opts.Format)
	}
	sum, err := rollout.WriteDir(opts.Out, Strategy, trajs)
	if err != nil {
		return rep, err
	}
	rep.Summary = sum
	if len(red.counts) > 0 {
		rep.Redactions = red.counts
	}
	return rep, nil
}

// redactor applies the redaction to every text imported and counts
// what it replaced.
type redactor struct {
	r      *redact.Redactor
	counts map[string]int
}

func (r *redactor) s(s string) string {
	out, n := r.r.Redact(s)
	for k, v := range n {
		r.counts[k] += v
	}
	return out
}

func (r *redactor) msgs(ms []llm.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		m.Content = r.s(m.Content)
		m.Name = r.s(m.Name)
		m.ToolCallID = r.s(m.ToolCallID)
		if len(m.ToolCalls) > 0 {
			m.ToolCalls = slices.Clone(m.ToolCalls)
			for j := range m.ToolCalls {
				m.ToolCalls[j].ID = r.s(m.ToolCalls[j].ID)
				m.ToolCalls[j].Arguments = r.s(m.ToolCalls[j].Arguments)
			}
		}
		out[i] = m
	}
	return out
}

func readLabels(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, invalid("--labels: %v", err)
	}
	defer f.Close()
	out := map[string]bool{}
	err = eachLine(f, path, func(n int, line []byte) error {
		var l struct {
			Session string `json:"session"`
			Success *bool  `json:"success"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil || l.Session == "" || l.Success == nil {
			return &LineError{path, n, fmt.Errorf(`want {"session": ID, "success": true|false}: %v`, err)}
		}
		out[l.Session] = *l.Success
		return nil
	})
	if err != nil {
		return nil, inputError{err}
	}
	return out, nil
}

// eachLine calls fn with every non-blank line of r, named name in
// errors, and its number; lines are bounded like trajectory records.
func eachLine(r io.Reader, name string, fn func(n int, line []byte) error) error {
	rd := jsonl.NewReader(r, name, rollout.RecordLimits)
	for {
		line, err := rd.NonBlank()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(rd.Line(), line); err != nil {
			return err
		}
	}
}

// call is one logged chat call.
type call struct {
	// purpose is the role the call was made for: agent or compressor.
	session, purpose, kind, model string
	// anonymous is set when the log names no session.
	anonymous bool
	messages  []llm.Message
	tools     bool
	output    llm.Message
	usage     llm.Usage
	success   *bool
}

// get returns the first of the |-separated paths that exists.
func get(line []byte, paths string) gjson.Result {
	for _, p := range strings.Split(paths, "|") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if v := gjson.GetBytes(line, p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

func parseCall(line []byte, m Mapping, maxMessages int) (call, error) {
	if !gjson.ValidBytes(line) {
		return call{}, errors.New("not valid JSON")
	}
	var c call
	msgs := get(line, m.Messages)
	if !msgs.IsArray() {
		return c, fmt.Errorf("no message list at %q", m.Messages)
	}
	n := 0
	msgs.ForEach(func(_, _ gjson.Result) bool { n++; return n <= maxMessages })
	if n > maxMessages {
		return c, limitError{fmt.Errorf("more than %d messages at %q, the limit of messages in one call; raise --max-messages if the log is meant to be this long", maxMessages, m.Messages)}
	}
	for i, v := range msgs.Array() {
		msg, err := parseMessage(v)
		if err != nil {
			return c, fmt.Errorf("message %d: %w", i, err)
		}
		c.messages = append(c.messages, msg)
	}
	if len(c.messages) == 0 {
		return c, fmt.Errorf("empty message list at %q", m.Messages)
	}
	out := get(line, m.Output)
	if !out.IsObject() {
		return c, fmt.Errorf("no reply message at %q", m.Output)
	}
	var err error
	if c.output, err = parseMessage(out); err != nil {
		return c, fmt.Errorf("reply: %w", err)
	}
	c.output.Role = "assistant"
	t := get(line, m.Tools)
	c.tools = t.IsArray() && len(t.Array()) > 0
	c.model = get(line, m.Model).String()
	c.usage.PromptTokens = int(get(line, m.PromptTokens).Int())
	c.usage.CompletionTokens = int(get(line, m.CompletionTokens).Int())
	c.session = get(line, m.Session).String()
	if c.session == "" {
		c.session, c.anonymous = openingHash(c.messages), true
	}
	switch p := strings.ToLower(get(line, m.Purpose).String()); p {
	case llm.RoleAgent, llm.RoleCompressor:
		c.purpose = p
	case "summarizer", "summary":
		c.purpose = llm.RoleCompressor
	case "":
		// Agents call with tools; a call without them is a compression.
		c.purpose = map[bool]string{true: llm.RoleAgent, false: llm.RoleCompressor}[c.tools]
	default:
		return c, fmt.Errorf("purpose %q at %q: want %s or %s", p, m.Purpose, llm.RoleAgent, llm.RoleCompressor)
	}
	c.kind = get(line, m.Kind).String()
	if c.kind == "" {
		c.kind = compress.KindHistory
	}
	if c.kind != compress.KindHistory && c.kind != compress.KindObservation {
		return c, fmt.Errorf("kind %q at %q: want history or observation", c.kind, m.Kind)
	}
	if s := get(line, m.Success); s.Exists() && s.Type != gjson.Null {
		b := s.Bool()
		c.success = &b
	}
	return c, nil
}

// openingHash names a session by its opening messages, as serve does.
func openingHash(ms []llm.Message) string {
	h := sha256.New()
	for _, m := range ms[:min(2, len(ms))] {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Role, m.Content)
	}
	return "s-" + hex.EncodeToString(h.Sum(nil))[:12]
}

func parseMessage(v gjson.Result) (llm.Message, error) {
	m := llm.Message{Role: v.Get("role").String(), Name: v.Get("name").String(), ToolCallID: v.Get("tool_call_id").String()}
	var err error
	if m.Content, err = content(v.Get("content")); err != nil {
		return m, err
	}
	for _, tc := range v.Get("tool_calls").Array() {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{
			ID: tc.Get("id").String(), Name: tc.Get("function.name").String(), Arguments: tc.Get("function.arguments").String(),
		})
	}
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	case "":
		return m, errors.New("no role")
	default:
		return m, fmt.Errorf("unknown role %q", m.Role)
	}
	return m, nil
}

// content is a message's text: a string, or the text parts of a list (other
// parts, such as images, carry none); anything else is an error, never "".
func content(c gjson.Result) (string, error) {
	switch {
	case c.Type == gjson.String:
		return c.Str, nil
	case !c.Exists() || c.Type == gjson.Null:
		return "", nil
	case !c.IsArray():
		return "", fmt.Errorf("content is %s; want a string or a list of content parts", jsonKind(c))
	}
	var parts []string
	for i, p := range c.Array() {
		if !p.IsObject() {
			return "", fmt.Errorf("content[%d] is %s; want a content part object", i, jsonKind(p))
		}
		t := p.Get("text")
		if !t.Exists() {
			continue
		}
		if t.Type != gjson.String {
			return "", fmt.Errorf("content[%d].text is %s; want a string", i, jsonKind(t))
		}
		parts = append(parts, t.Str)
	}
	return strings.Join(parts, "\n"), nil
}

// jsonKind names a JSON value's type for an error message.
func jsonKind(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "an object"
	case v.IsArray():
		return "a list"
	case v.Type == gjson.Number:
		return "a number"
	case v.Type == gjson.True || v.Type == gjson.False:
		return "a boolean"
	case v.Type == gjson.Null:
		return "null"
	}
	return "a string"
}

// lineRef locates a log line.
type lineRef struct {
	n           int
	off, length int64
}

// sessionIndex is where each session's calls sit in the log, in order of
// first appearance; the calls themselves are read again per session, so
// memory holds offsets, not logs.
type sessionIndex struct {
	path  string
	order []string
	lines map[string][]lineRef
	// tasks are the first user messages of the anonymous agent sessions,
	// newest last, to attribute compressor calls that name no session.
	tasks []anonTask
}

type anonTask struct{ session, task string }

// attribute returns the session of an anonymous call: its own opening for
// an agent call; for a compressor call, the newest anonymous agent session
// whose task the compressor prompt quotes (a summary prompt renders the
// task), else its own.
func (idx *sessionIndex) attribute(c call) string {
	if c.purpose == llm.RoleAgent {
		if task := firstUser(c.messages); task != "" && !slices.ContainsFunc(idx.tasks, func(t anonTask) bool { return t.session == c.session }) {
			idx.tasks = append(idx.tasks, anonTask{c.session, task})
		}
		return c.session
	}
	for i := len(idx.tasks) - 1; i >= 0; i-- {
		for _, m := range c.messages {
			if strings.Contains(m.Content, idx.tasks[i].task) {
				return idx.tasks[i].session
			}
		}
	}
	return c.session
}

func firstUser(ms []llm.Message) string {
	for _, m := range ms {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

func indexSessions(ctx context.Context, opts Options, m Mapping, rep *Report) (*sessionIndex, error) {
	f, err := os.Open(opts.In)
	if err != nil {
		return nil, invalid("--in: %v", err)
	}
	defer f.Close()
	idx := &sessionIndex{path: opts.In, lines: map[string][]lineRef{}}
	rd := jsonl.NewReader(f, opts.In, opts.limits())
	defer func() { rep.Replaced = rd.Replaced() }()
	var off int64
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, inputError{err}
		}
		n := rd.Line()
		if n%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The line's bytes in the file, which LossyUTF8 may have changed
		// in raw; Next drops the newline.
		end := rd.Offset()
		if !rd.Unterminated() {
			end--
		}
		ref := lineRef{n: n, off: off, length: end - off}
		off = rd.Offset()
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		rep.Lines++
		c, err := parseCall(line, m, opts.MaxMessages)
		var lim limitError
		if errors.As(err, &lim) {
			return nil, inputError{&LineError{opts.In, n, err}}
		}
		if err != nil {
			if opts.SkipBad {
				rep.BadLines++
				continue
			}
			return nil, inputError{fmt.Errorf("%w (use --skip-bad to skip such lines)", &LineError{opts.In, n, err})}
		}
		rep.Calls++
		if c.anonymous {
			c.session = idx.attribute(c)
		}
		if _, ok := idx.lines[c.session]; !ok {
			idx.order = append(idx.order, c.session)
		}
		idx.lines[c.session] = append(idx.lines[c.session], ref)
		if len(idx.lines[c.session]) > opts.MaxSessionCalls {
			return nil, inputError{&LineError{opts.In, n, tooLong(idx.lines[c.session][0].n, opts.MaxSessionCalls)}}
		}
	}
	if rep.Calls == 0 {
		return nil, invalid("%s: no chat calls to import", opts.In)
	}
	return idx, nil
}

func (idx *sessionIndex) trajectories(ctx context.Context, m Mapping, opts Options, red *redactor, labels map[string]bool, rep *Report) iter.Seq2[*rollout.Trajectory, error] {
	return func(yield func(*rollout.Trajectory, error) bool) {
		f, err := os.Open(idx.path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		prog := progress.New("import", len(idx.order))
		defer prog.Finish()
		for _, s := range idx.order {
			prog.Add(1)
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			var calls []call
			for _, ref := range idx.lines[s] {
				buf := make([]byte, ref.length)
				if _, err := f.ReadAt(buf, ref.off); err != nil {
					yield(nil, fmt.Errorf("read %s:%d: %w", idx.path, ref.n, err))
					return
				}
				if opts.LossyUTF8 {
					buf, _ = jsonl.Lossy(buf) // counted when indexed
				}
				c, err := parseCall(bytes.TrimSpace(buf), m, opts.MaxMessages)
				if err != nil {
					yield(nil, &LineError{idx.path, ref.n, err})
					return
				}
				calls = append(calls, c)
			}
			t := buildTrajectory(s, calls, red)
			if l, ok := labels[s]; ok {
				t.Success, t.Score.Success = l, l
			}
			if _, ok := labels[s]; ok || anyLabel(calls) {
				rep.Labeled++
			}
			rep.Sessions++
			if !yield(t, nil) {
				return
			}
		}
	}
}

// tooLong refuses a session over the limit of calls, before its calls are
// read into memory; it names the session by its first line, not its id,
// which the log may have filled with anything.
func tooLong(first, limit int) error {
	return fmt.Errorf("the session that begins at line %d has more than %d calls, the limit of calls in one session; raise --max-session-calls if the log is meant to be this long (a session is refused, not split: its parts would be scored as tasks of their own)", first, limit)
}

func anyLabel(calls []call) bool {
	return slices.ContainsFunc(calls, func(c call) bool { return c.success != nil })
}

// buildTrajectory turns a session's calls, in log order, into a trajectory:
// agent calls become turns (the observation of a turn's tool call is the
// tool message answering it in a later call), compressor calls become
// history or observation compression events. The session's last label is
// its outcome; an unlabeled session counts as failed.
func buildTrajectory(session string, calls []call, red *redactor) *rollout.Trajectory {
	t := &rollout.Trajectory{TaskID: red.s(session), Split: "train", Strategy: Strategy}
	var agentCalls []call
	for _, c := range calls {
		if c.success != nil {
			t.Success = *c.success
		}
		if c.purpose == llm.RoleAgent {
			agentCalls = append(agentCalls, c)
		}
	}
	t.Score = env.Score{Success: t.Success}
	for _, c := range agentCalls {
		if task := firstUser(c.messages); task != "" {
			t.Task = red.s(task)
			break
		}
	}
	// Tool results by call id, from every later request.
	results := map[string]string{}
	for _, c := range agentCalls {
		for _, m := range c.messages {
			if m.Role == "tool" && m.ToolCallID != "" {
				results[m.ToolCallID] = m.Content
			}
		}
	}
	met := &t.Metrics
	step := 0
	for _, c := range calls {
		met.LLMCalls++
		if c.purpose == llm.RoleCompressor {
			met.CompressorCalls++
			met.CompressorInputTokens += c.usage.PromptTokens
			met.CompressorOutputTokens += c.usage.CompletionTokens
			if t.CompressorModel == "" {
				t.CompressorModel = c.model
			}
			t.Events = append(t.Events, rollout.CompressionEvent{
				Kind: c.kind, Step: step, GuidelineID: GuidelineID, Vars: map[string]string{},
				Input: red.msgs(c.messages), Output: red.s(c.output.Content), Usage: c.usage, Model: c.model, Calls: 1,
			})
			continue
		}
		step++
		if t.AgentModel == "" {
			t.AgentModel = c.model
		}
		turn := rollout.Turn{Step: step, Input: red.msgs(c.messages), Output: red.msgs([]llm.Message{c.output})[0], Usage: c.usage}
		if len(c.output.ToolCalls) > 0 {
			tc := turn.Output.ToolCalls[0]
			args := json.RawMessage(tc.Arguments)
			if !json.Valid(args) {
				args, _ = json.Marshal(tc.Arguments)
			}
			turn.Action = env.Action{Tool: tc.Name, Arguments: args}
			turn.Observation = red.s(results[c.output.ToolCalls[0].ID])
			met.Steps++
		}
		t.Turns = append(t.Turns, turn)
		met.AgentCalls++
		met.AgentInputTokens += c.usage.PromptTokens
		met.AgentOutputTokens += c.usage.CompletionTokens
		nIn, nOut := float64(c.usage.PromptTokens), float64(c.usage.CompletionTokens)
		met.Dependency += (nIn + 2*nOut) * nOut / 2
		met.PeakTokens = max(met.PeakTokens, c.usage.PromptTokens)
	}
	return t
}

// ctxoptRecords reads ctxopt's own records (serve session logs, rollout
// trajectories) and redacts and relabels them.
func ctxoptRecords(ctx context.Context, opts Options, red *redactor, labels map[string]bool, rep *Report) iter.Seq2[*rollout.Trajectory, error] {
	return func(yield func(*rollout.Trajectory, error) bool) {
		f, err := os.Open(opts.In)
		if err != nil {
			yield(nil, invalid("--in: %v", err))
			return
		}
		defer f.Close()
		rd := jsonl.NewReader(f, opts.In, opts.limits())
		defer func() { rep.Replaced = rd.Replaced() }()
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			line, err := rd.NonBlank()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, inputError{err})
				return
			}
			n := rd.Line()
			t, err := rollout.DecodeTrajectory(line)
			if err != nil && rd.SkipTorn(err) {
				return
			}
			rep.Lines++
			if err != nil {
				if opts.SkipBad {
					rep.BadLines++
					continue
				}
				yield(nil, inputError{fmt.Errorf("%w (use --skip-bad to skip such lines)", &LineError{opts.In, n, err})})
				return
			}
			if n := len(t.Turns) + len(t.Events); n > opts.MaxSessionCalls {
				yield(nil, inputError{&LineError{opts.In, rd.Line(), tooLong(rd.Line(), opts.MaxSessionCalls)}})
				return
			}
			redactTrajectory(t, red)
			if l, ok := labels[t.TaskID]; ok {
				t.Success, t.Score.Success = l, l
				rep.Labeled++
			}
			rep.Sessions++
			if !yield(t, nil) {
				return
			}
		}
	}
}

func redactTrajectory(t *rollout.Trajectory, red *redactor) {
	t.TaskID, t.Task = red.s(t.TaskID), red.s(t.Task)
	for i := range t.Turns {
		tu := &t.Turns[i]
		tu.Input = red.msgs(tu.Input)
		tu.Output = red.msgs([]llm.Message{tu.Output})[0]
		tu.Observation, tu.CompressedObservation = red.s(tu.Observation), red.s(tu.CompressedObservation)
		if a := red.s(string(tu.Action.Arguments)); a != string(tu.Action.Arguments) {
			tu.Action.Arguments = json.RawMessage(a)
			if !json.Valid(tu.Action.Arguments) {
				tu.Action.Arguments, _ = json.Marshal(a)
			}
		}
	}
	for i := range t.Events {
		e := &t.Events[i]
		e.Input, e.Output = red.msgs(e.Input), red.s(e.Output)
		for _, k := range slices.Sorted(maps.Keys(e.Vars)) {
			e.Vars[k] = red.s(e.Vars[k])
		}
	}
}
