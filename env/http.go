package env

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
)

// HTTP defaults.
const (
	DefaultHTTPTimeout = 60 * time.Second
	DefaultHTTPRetries = 3
	// maxReplyBytes bounds one reply of an environment server.
	maxReplyBytes = 16 << 20
	// maxTaskLine bounds one line of a tasks file.
	maxTaskLine = 4 << 20
)

// HTTPConfig configures the external HTTP environment (job file:
// env.http): a server of its own that ctxopt calls per episode. Reply paths
// are gjson paths, relative to Envelope when one is set; "@this" names the
// (enveloped) reply itself. A preset fills every field left empty.
// docs/http-environment.md documents the fields and both presets.
type HTTPConfig struct {
	// Preset is appworld, generic or empty.
	Preset  string `yaml:"preset" json:"preset,omitempty"`
	BaseURL string `yaml:"base_url" json:"base_url"`
	// Timeout bounds one attempt of a call; MaxRetries counts retries
	// after the first attempt (negative: none).
	Timeout    time.Duration `yaml:"timeout" json:"timeout,omitempty"`
	MaxRetries int           `yaml:"max_retries" json:"max_retries,omitempty"`
	// HeadersEnv maps request headers to the environment variables that
	// hold their values (Authorization: ENV_TOKEN_VAR), so tokens stay out
	// of job files; values never appear in logs or errors.
	HeadersEnv map[string]string `yaml:"headers_env" json:"headers_env,omitempty"`
	// Envelope is the path every reply's payload sits under ("output").
	Envelope     string `yaml:"envelope" json:"envelope,omitempty"`
	SystemPrompt string `yaml:"system_prompt" json:"system_prompt,omitempty"`
	// SuccessReward is the reward at or above which an episode without a
	// success path counts as a success; 0 means 1.
	SuccessReward float64 `yaml:"success_reward" json:"success_reward,omitempty"`
	// TasksFile is JSONL of {"id","prompt","split"}; else Tasks is called.
	TasksFile string        `yaml:"tasks_file" json:"tasks_file,omitempty"`
	Tasks     *HTTPEndpoint `yaml:"tasks" json:"tasks,omitempty"`
	// Tools are given here, or fetched from ToolsEndpoint.
	Tools         []HTTPTool    `yaml:"tools" json:"tools,omitempty"`
	ToolsEndpoint *HTTPEndpoint `yaml:"tools_endpoint" json:"tools_endpoint,omitempty"`
	Reset         *HTTPEndpoint `yaml:"reset" json:"reset,omitempty"`
	Step          *HTTPEndpoint `yaml:"step" json:"step,omitempty"`
	// Done is called after each step when Step has no done path.
	Done     *HTTPEndpoint `yaml:"done" json:"done,omitempty"`
	Evaluate *HTTPEndpoint `yaml:"evaluate" json:"evaluate,omitempty"`
	Close    *HTTPEndpoint `yaml:"close" json:"close,omitempty"`
}

// HTTPTool is a tool given in the job file; Parameters is a JSON schema.
type HTTPTool struct {
	Name        string         `yaml:"name" json:"name"`
	Description string         `yaml:"description" json:"description"`
	Parameters  map[string]any `yaml:"parameters" json:"parameters"`
}

// HTTPEndpoint is one call: where it goes, what it sends and where the
// values sit in its reply. Body string values that are placeholders are
// replaced: $task_id, $session, $action ({"tool","arguments"}), $tool,
// $arguments (the raw JSON object) and $arg.PATH (a gjson path into the
// arguments).
type HTTPEndpoint struct {
	Method string         `yaml:"method" json:"method,omitempty"`
	Path   string         `yaml:"path" json:"path"`
	Body   map[string]any `yaml:"body" json:"body,omitempty"`

	// Reply paths: reset (session, observation), step (observation, done,
	// reward, success), done (done), evaluate (success, reward), tasks
	// and tools_endpoint (items, and per item id, prompt, split or name,
	// description, parameters).
	Session     string `yaml:"session" json:"session,omitempty"`
	Observation string `yaml:"observation" json:"observation,omitempty"`
	DonePath    string `yaml:"done" json:"done,omitempty"`
	Reward      string `yaml:"reward" json:"reward,omitempty"`
	Success     string `yaml:"success" json:"success,omitempty"`
	Items       string `yaml:"items" json:"items,omitempty"`
	ID          string `yaml:"id" json:"id,omitempty"`
	Prompt      string `yaml:"prompt" json:"prompt,omitempty"`
	Split       string `yaml:"split" json:"split,omitempty"`
	Name        string `yaml:"name" json:"name,omitempty"`
	Description string `yaml:"description" json:"description,omitempty"`
	Parameters  string `yaml:"parameters" json:"parameters,omitempty"`
}

// placeholders each endpoint may use.
var placeholders = map[string][]string{
	"reset":    {"$task_id"},
	"step":     {"$task_id", "$session", "$action", "$tool", "$arguments", "$arg."},
	"done":     {"$task_id", "$session"},
	"evaluate": {"$task_id", "$session"},
	"close":    {"$task_id", "$session"},
	"tasks":    nil,
	"tools":    nil,
}

// WithPreset returns c with the fields it leaves empty taken from its
// preset, and with the defaults applied.
func (c HTTPConfig) WithPreset() (HTTPConfig, error) {
	if c.Preset != "" {
		p, ok := httpPresets[c.Preset]
		if !ok {
			return c, fmt.Errorf("field env.http.preset: unknown preset %q (known: %s)", c.Preset, strings.Join(presetNames(), ", "))
		}
		c = mergeHTTP(c, p)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultHTTPTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultHTTPRetries
	}
	if c.SuccessReward == 0 {
		c.SuccessReward = 1
	}
	return c, nil
}

// Validate checks a config after WithPreset; errors name the field.
func (c HTTPConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("field env.http.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base_url", "want an http(s) URL such as http://127.0.0.1:8000, got %q", c.BaseURL)
	}
	if c.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	switch {
	case c.TasksFile == "" && c.Tasks == nil:
		bad("tasks_file", "give a tasks file or a tasks endpoint (env.http.tasks)")
	case c.TasksFile != "" && c.Tasks != nil:
		bad("tasks_file", "give a tasks file or a tasks endpoint, not both")
	}
	if len(c.Tools) == 0 && c.ToolsEndpoint == nil {
		bad("tools", "give the tools or a tools_endpoint")
	}
	for i, t := range c.Tools {
		if t.Name == "" {
			bad(fmt.Sprintf("tools[%d].name", i), "must not be empty")
		}
	}
	for _, e := range []struct {
		name     string
		ep       *HTTPEndpoint
		required bool
	}{
		{"reset", c.Reset, true}, {"step", c.Step, true}, {"done", c.Done, false},
		{"evaluate", c.Evaluate, false}, {"close", c.Close, false},
		{"tasks", c.Tasks, false}, {"tools", c.ToolsEndpoint, false},
	} {
		if e.ep == nil {
			if e.required {
				bad(e.name, "missing: say which endpoint %ss an episode", e.name)
			}
			continue
		}
		if !strings.HasPrefix(e.ep.Path, "/") {
			bad(e.name+".path", "want a path starting with /, got %q", e.ep.Path)
		}
		if m := e.ep.method(); m != http.MethodGet && m != http.MethodPost && m != http.MethodPut && m != http.MethodDelete {
			bad(e.name+".method", "want GET, POST, PUT or DELETE, got %q", e.ep.Method)
		}
		if err := checkPlaceholders(e.ep.Body, placeholders[e.name]); err != nil {
			bad(e.name+".body", "%v", err)
		}
	}
	if c.Step != nil && c.Step.Observation == "" {
		bad("step.observation", "say where the observation sits in the step reply (\"@this\" for the whole reply)")
	}
	if c.Tasks != nil && c.Tasks.Items == "" {
		bad("tasks.items", "say where the task list sits in the reply")
	}
	if c.ToolsEndpoint != nil && c.ToolsEndpoint.Items == "" {
		bad("tools_endpoint.items", "say where the tool list sits in the reply")
	}
	return errors.Join(errs...)
}

func (e *HTTPEndpoint) method() string {
	if e.Method == "" {
		return http.MethodPost
	}
	return strings.ToUpper(e.Method)
}

func checkPlaceholders(v any, allowed []string) error {
	switch x := v.(type) {
	case string:
		if !strings.HasPrefix(x, "$") {
			return nil
		}
		for _, a := range allowed {
			if x == a || strings.HasSuffix(a, ".") && strings.HasPrefix(x, a) && len(x) > len(a) {
				return nil
			}
		}
		return fmt.Errorf("placeholder %q is not one of %v", x, allowed)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := checkPlaceholders(x[k], allowed); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkPlaceholders(e, allowed); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// HTTPEnv is an environment served by an external HTTP server. It is safe
// for concurrent use; episodes are independent sessions.
type HTTPEnv struct {
	cfg     HTTPConfig
	headers http.Header
	client  *http.Client
	tools   []ToolSpec
	tasks   map[string][]Task
	version string
	// settings is Settings' answer, fixed when the environment is made.
	settings string
	red      Redactor // nil: only the header values are scrubbed
}

var (
	_ Environment = (*HTTPEnv)(nil)
	_ Configured  = (*HTTPEnv)(nil)
)

// Redactor replaces secrets in text (redact.Redactor is one). The HTTP
// environment quotes the server's replies in its errors, which reach logs
// and trajectories, so they go through it first.
type Redactor interface {
	Redact(s string) (string, map[string]int)
}

// NewHTTP applies cfg's preset, validates it, and loads the tools and
// tasks (fetching them when the config names endpoints). Replies and URLs
// quoted in errors are redacted by red (may be nil) and never carry the
// values of the configured headers.
func NewHTTP(ctx context.Context, cfg HTTPConfig, red Redactor) (*HTTPEnv, error) {
	cfg, err := cfg.WithPreset()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &HTTPEnv{cfg: cfg, tasks: map[string][]Task{}, headers: http.Header{}, red: red}
	e.client = &http.Client{Transport: &llm.Retrier{
		Policy:  llm.RetryPolicy{MaxRetries: cfg.MaxRetries, Timeout: cfg.Timeout},
		MaxBody: maxReplyBytes + 1, Check: e.checkReply, Log: logAttempt,
	}}
	for _, h := range slices.Sorted(maps.Keys(cfg.HeadersEnv)) {
		v := os.Getenv(cfg.HeadersEnv[h])
		if v == "" {
			return nil, fmt.Errorf("field env.http.headers_env.%s: the environment variable %s is unset or empty", h, cfg.HeadersEnv[h])
		}
		e.headers.Set(h, v)
	}
	if e.tools, err = e.loadTools(ctx); err != nil {
		return nil, err
	}
	var tasks []Task
	if cfg.TasksFile != "" {
		tasks, err = readTasksFile(cfg.TasksFile)
	} else {
		tasks, err = e.fetchTasks(ctx)
	}
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", cfg.Preset, cfg.BaseURL)
	for _, t := range tasks {
		e.tasks[t.Split] = append(e.tasks[t.Split], t)
		fmt.Fprintf(h, "%s\t%s\t%s\n", t.ID, t.Split, t.Prompt)
	}
	e.version = "http:" + hex.EncodeToString(h.Sum(nil))[:16]
	// Settings: what the server is sent and how its replies are read and
	// scored; how long to wait and how often to retry change no result.
	beh := cfg
	beh.Timeout, beh.MaxRetries, beh.HeadersEnv = 0, 0, nil
	b, err := json.Marshal(struct {
		Config HTTPConfig `json:"config"`
		Tools  []ToolSpec `json:"tools"`
	}{beh, e.tools})
	if err != nil {
		return nil, fmt.Errorf("env.http: %w", err)
	}
	s := sha256.Sum256(b)
	e.settings = e.version + " config=" + hex.EncodeToString(s[:])[:16]
	return e, nil
}

// Settings names the server, its tasks, the tools and the configuration
// that shapes requests and reads replies and scores.
func (e *HTTPEnv) Settings() string { return e.settings }

// Name implements Environment.
func (e *HTTPEnv) Name() string { return "http" }

// Version identifies the server and task list, for rollout fingerprints.
func (e *HTTPEnv) Version() string { return e.version }

// Tools implements Environment.
func (e *HTTPEnv) Tools() []ToolSpec { return e.tools }

// Tasks implements Environment.
func (e *HTTPEnv) Tasks(split string) ([]Task, error) {
	if split != "train" && split != "test" {
		return nil, fmt.Errorf("unknown split %q: want train or test", split)
	}
	return e.tasks[split], nil
}

// AgentPrompts gives the agent the configured system prompt and the task's
// own text.
func (e *HTTPEnv) AgentPrompts(t Task) (system, user string, err error) {
	return e.cfg.SystemPrompt, t.Prompt, nil
}

// Reset opens a session on the server for task.
func (e *HTTPEnv) Reset(ctx context.Context, t Task) (Episode, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("env http reset: %w", err)
	}
	vars := map[string]any{"$task_id": t.ID}
	reply, err := e.callAttempts(ctx, context.WithoutCancel(ctx), "reset", e.cfg.Reset, vars)
	if err != nil {
		return nil, err
	}
	ep := &httpEpisode{env: e, task: t, session: t.ID}
	defer func() {
		if ctx.Err() != nil {
			// Cancelled while the server opened the session.
			ep.Close(context.WithoutCancel(ctx))
		}
	}()
	if p := e.cfg.Reset.Session; p != "" {
		v, err := e.value(reply, "reset", "session", p)
		if err != nil {
			ep.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		ep.session = v.String()
	}
	if p := e.cfg.Reset.Observation; p != "" {
		v, err := e.value(reply, "reset", "observation", p)
		if err != nil {
			ep.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		ep.opening = observationText(v)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("env http reset: %w", err)
	}
	return ep, nil
}

// value returns the value at path of a reply, or an error naming the path
// and the config field that holds it.
func (e *HTTPEnv) value(reply []byte, endpoint, field, path string) (gjson.Result, error) {
	full := joinPath(e.cfg.Envelope, path)
	v := gjson.GetBytes(reply, full)
	if !v.Exists() {
		return v, fmt.Errorf("env http: %s reply has no value at %q (env.http.%s.%s); reply: %s",
			endpoint, full, endpoint, field, e.quote(reply))
	}
	return v, nil
}

// joinPath puts path under the envelope; "@this" is the envelope itself.
func joinPath(envelope, path string) string {
	switch {
	case envelope == "":
		return path
	case path == "@this" || path == "":
		return envelope
	}
	return envelope + "." + path
}

func observationText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

// Bounds of a reply quoted in an error: the part redacted, and the part
// shown. Redacting more than is shown keeps a secret that straddles the
// shown end whole for the redactor.
const (
	quoteRedacted = 16 << 10
	quoteShown    = 300
)

// quote is a reply (or URL) as an error may show it: redacted, the values
// of the configured headers (tokens a server may echo) replaced, and cut
// to quoteShown bytes on a UTF-8 boundary.
func (e *HTTPEnv) quote(b []byte) string {
	s := clip(string(b), quoteRedacted)
	for _, vs := range e.headers {
		for _, v := range vs {
			if v != "" {
				s = strings.ReplaceAll(s, v, "[REDACTED:header]")
			}
		}
	}
	if e.red != nil {
		s, _ = e.red.Redact(s)
	}
	return clip(s, quoteShown)
}

// quoteURL redacts the URL net/http errors quote (a token in the query).
func (e *HTTPEnv) quoteURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = e.quote([]byte(ue.URL))
	}
	return err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// call sends one request under the LLM clients' retry policy (408, 429,
// 5xx, timeouts, broken connections, replies that are not JSON); when the
// server stays down the error wraps llm.ErrUnavailable, which rollouts
// record as an infrastructure failure.
func (e *HTTPEnv) call(ctx context.Context, name string, ep *HTTPEndpoint, vars map[string]any) ([]byte, error) {
	return e.callAttempts(ctx, ctx, name, ep, vars)
}

// callAttempts is call with the attempts under actx: a reset runs its
// attempt to the end even when ctx is cancelled meanwhile, so a session the
// server opened is known and can be closed. Retries stop with ctx.
func (e *HTTPEnv) callAttempts(ctx, actx context.Context, name string, ep *HTTPEndpoint, vars map[string]any) ([]byte, error) {
	u := strings.TrimRight(e.cfg.BaseURL, "/") + ep.Path
	var body []byte
	if ep.method() != http.MethodGet {
		b, err := json.Marshal(fill(ep.Body, vars))
		if err != nil {
			return nil, fmt.Errorf("env http %s: encode body: %w", name, err)
		}
		body = b
	}
	rctx, try := llm.WithTry(llm.RetryUntil(actx, ctx))
	reply, err := e.send(rctx, ep.method(), u, body)
	switch {
	case err == nil:
		return reply, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("env http %s: %w", name, ctx.Err())
	case try.GaveUp:
		return nil, fmt.Errorf("env http %s: %w: %s %s after %d attempts: %w", name, llm.ErrUnavailable, ep.method(), e.quote([]byte(u)), try.N, err)
	}
	return nil, fmt.Errorf("env http %s: %s %s: %w", name, ep.method(), e.quote([]byte(u)), err)
}

// errNotJSON marks a 2xx reply that does not parse; like an LLM server's
// garbled answer it is retried.
var errNotJSON = errors.New("reply is not JSON")

// checkReply is the retry policy's Check: a 2xx reply must be JSON of at
// most maxReplyBytes.
func (e *HTTPEnv) checkReply(_ *http.Request, status int, reply []byte) error {
	switch {
	case status < 200 || status > 299:
		return nil
	case len(reply) > maxReplyBytes:
		return fmt.Errorf("reply larger than %d bytes", maxReplyBytes)
	case !gjson.ValidBytes(reply):
		return fmt.Errorf("%w: %s", errNotJSON, e.quote(reply))
	}
	return nil
}

func logAttempt(r *http.Request, t llm.Try, wait time.Duration) {
	if t.Err != nil || t.Status/100 != 2 {
		slog.Debug("env http attempt failed", "path", r.URL.Path, "attempt", t.N, "status", t.Status,
			"timeout", t.TimedOut, "err", t.Err, "wait", wait, "exhausted", t.GaveUp)
	}
}

// send makes the request, with its retries, and returns a 2xx reply, which
// checkReply passed.
func (e *HTTPEnv) send(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, e.quoteURL(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for h, v := range e.headers {
		req.Header[h] = v
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.quoteURL(err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body) // buffered by the Retrier
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, e.quote(reply))
	}
	return reply, nil
}

// fill replaces placeholders in a body template.
func fill(v any, vars map[string]any) any {
	switch x := v.(type) {
	case string:
		if r, ok := vars[x]; ok {
			return r
		}
		if strings.HasPrefix(x, "$arg.") {
			if args, ok := vars["$arguments"].(json.RawMessage); ok {
				return json.RawMessage(gjson.GetBytes(args, strings.TrimPrefix(x, "$arg.")).Raw)
			}
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fill(e, vars)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fill(e, vars)
		}
		return out
	}
	return v
}

func (e *HTTPEnv) loadTools(ctx context.Context) ([]ToolSpec, error) {
	var out []ToolSpec
	seen := map[string]bool{}
	add := func(t ToolSpec, where string) error {
		if t.Name == "" || seen[t.Name] {
			return fmt.Errorf("%s: tool name %q is empty or repeated", where, t.Name)
		}
		if len(t.Parameters) == 0 {
			t.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !json.Valid(t.Parameters) || !gjson.ParseBytes(t.Parameters).IsObject() {
			return fmt.Errorf("%s: tool %s: parameters must be a JSON schema object", where, t.Name)
		}
		seen[t.Name] = true
		out = append(out, t)
		return nil
	}
	for i, t := range e.cfg.Tools {
		params, err := json.Marshal(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("field env.http.tools[%d].parameters: %w", i, err)
		}
		if t.Parameters == nil {
			params = nil
		}
		if err := add(ToolSpec{Name: t.Name, Description: t.Description, Parameters: params}, fmt.Sprintf("field env.http.tools[%d]", i)); err != nil {
			return nil, err
		}
	}
	ep := e.cfg.ToolsEndpoint
	if ep == nil {
		return out, nil
	}
	reply, err := e.call(ctx, "tools", ep, nil)
	if err != nil {
		return nil, err
	}
	items, err := e.value(reply, "tools_endpoint", "items", ep.Items)
	if err != nil {
		return nil, err
	}
	if !items.IsArray() {
		return nil, fmt.Errorf("env http: tools reply: %q is not an array (env.http.tools_endpoint.items)", joinPath(e.cfg.Envelope, ep.Items))
	}
	for i, it := range items.Array() {
		get := func(p, def string) gjson.Result { return it.Get(or(p, def)) }
		t := ToolSpec{Name: get(ep.Name, "name").String(), Description: get(ep.Description, "description").String()}
		if p := get(ep.Parameters, "parameters"); p.Exists() {
			t.Parameters = json.RawMessage(p.Raw)
		}
		if err := add(t, fmt.Sprintf("env http: tools reply item %d", i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// httpTaskLine is one line of a tasks file.
type httpTaskLine struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	Split  string `json:"split"`
}

func (l httpTaskLine) task() (Task, error) {
	switch {
	case l.ID == "":
		return Task{}, errors.New(`no "id"`)
	case strings.TrimSpace(l.Prompt) == "":
		return Task{}, fmt.Errorf(`task %s: no "prompt"`, l.ID)
	case l.Split != "train" && l.Split != "test":
		return Task{}, fmt.Errorf(`task %s: "split" is %q, want train or test`, l.ID, l.Split)
	}
	return Task{ID: l.ID, Split: l.Split, Prompt: l.Prompt}, nil
}

func readTasksFile(path string) ([]Task, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("field env.http.tasks_file: %w", err)
	}
	d := dataset{fsys: os.DirFS(filepath.Dir(path)), display: func(string) string { return path },
		limits: jsonl.Limits{Line: maxTaskLine, File: DefaultLimits.File}}
	var out []Task
	ids := map[string]bool{}
	err := d.readLines(filepath.Base(path), func(_ int, line []byte) error {
		var l httpTaskLine
		if err := decodeStrict(line, &l); err != nil {
			return fmt.Errorf(`%w (want {"id","prompt","split"})`, err)
		}
		t, err := l.task()
		if err != nil {
			return err
		}
		if ids[t.ID] {
			return fmt.Errorf("task id %s repeated", t.ID)
		}
		ids[t.ID] = true
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is empty: want one task per line", path)
	}
	return out, nil
}

func (e *HTTPEnv) fetchTasks(ctx context.Context) ([]Task, error) {
	ep := e.cfg.Tasks
	reply, err := e.call(ctx, "tasks", ep, nil)
	if err != nil {
		return nil, err
	}
	items, err := e.value(reply, "tasks", "items", ep.Items)
	if err != nil {
		return nil, err
	}
	if !items.IsArray() {
		return nil, fmt.Errorf("env http: tasks reply: %q is not an array (env.http.tasks.items)", joinPath(e.cfg.Envelope, ep.Items))
	}
	var out []Task
	ids := map[string]bool{}
	for i, it := range items.Array() {
		l := httpTaskLine{
			ID: it.Get(or(ep.ID, "id")).String(), Prompt: it.Get(or(ep.Prompt, "prompt")).String(),
			Split: it.Get(or(ep.Split, "split")).String(),
		}
		t, err := l.task()
		if err != nil {
			return nil, fmt.Errorf("env http: tasks reply item %d: %w", i, err)
		}
		if ids[t.ID] {
			return nil, fmt.Errorf("env http: tasks reply item %d: task id %s repeated", i, t.ID)
		}
		ids[t.ID] = true
		out = append(out, t)
	}
	return out, nil
}

// httpEpisode is one session on the server.
type httpEpisode struct {
	env     *HTTPEnv
	task    Task
	session string
	opening string
	// reward and success of the last step, for servers scored per step.
	reward     float64
	success    *bool
	closeOnce  sync.Once
	closeError error
}

// Opening is the first observation the reset returned.
func (ep *httpEpisode) Opening() string { return ep.opening }

func (ep *httpEpisode) vars() map[string]any {
	return map[string]any{"$task_id": ep.task.ID, "$session": ep.session}
}

// Step sends the action; when the server says the episode is done it is
// scored at once.
func (ep *httpEpisode) Step(ctx context.Context, a Action) (StepResult, error) {
	e := ep.env
	args := a.Arguments
	if !json.Valid(args) || !gjson.ParseBytes(args).IsObject() {
		return StepResult{Observation: "error: the arguments must be a JSON object"}, nil
	}
	if !slices.ContainsFunc(e.tools, func(t ToolSpec) bool { return t.Name == a.Tool }) {
		return StepResult{Observation: fmt.Sprintf("error: unknown tool %q", a.Tool)}, nil
	}
	vars := ep.vars()
	action, _ := json.Marshal(a)
	vars["$action"], vars["$tool"], vars["$arguments"] = json.RawMessage(action), a.Tool, args
	if missing := missingArg(e.cfg.Step.Body, args); missing != "" {
		return StepResult{Observation: fmt.Sprintf("error: the call to %s needs the argument %q", a.Tool, missing)}, nil
	}
	reply, err := e.call(ctx, "step", e.cfg.Step, vars)
	if err != nil {
		return StepResult{}, err
	}
	st := e.cfg.Step
	obs, err := e.value(reply, "step", "observation", st.Observation)
	if err != nil {
		return StepResult{}, err
	}
	res := StepResult{Observation: observationText(obs)}
	if err := ep.readScore(reply, "step", st); err != nil {
		return StepResult{}, err
	}
	switch {
	case st.DonePath != "":
		v, err := e.value(reply, "step", "done", st.DonePath)
		if err != nil {
			return StepResult{}, err
		}
		res.Done = v.Bool()
	case e.cfg.Done != nil:
		r, err := e.call(ctx, "done", e.cfg.Done, ep.vars())
		if err != nil {
			return StepResult{}, err
		}
		v, err := e.value(r, "done", "done", or(e.cfg.Done.DonePath, "@this"))
		if err != nil {
			return StepResult{}, err
		}
		res.Done = v.Bool()
	}
	if res.Done {
		s, err := ep.FinishChecked(ctx)
		if err != nil {
			return StepResult{}, err
		}
		res.Score = &s
	}
	return res, nil
}

// missingArg returns the first $arg.PATH of body the arguments lack.
func missingArg(v any, args json.RawMessage) string {
	switch x := v.(type) {
	case string:
		if p, ok := strings.CutPrefix(x, "$arg."); ok && !gjson.GetBytes(args, p).Exists() {
			return p
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if m := missingArg(x[k], args); m != "" {
				return m
			}
		}
	case []any:
		for _, e := range x {
			if m := missingArg(e, args); m != "" {
				return m
			}
		}
	}
	return ""
}

// readScore keeps the reward and success a reply carries, where configured.
func (ep *httpEpisode) readScore(reply []byte, endpoint string, spec *HTTPEndpoint) error {
	if spec.Reward != "" {
		v, err := ep.env.value(reply, endpoint, "reward", spec.Reward)
		if err != nil {
			return err
		}
		ep.reward = v.Float()
	}
	if spec.Success != "" {
		v, err := ep.env.value(reply, endpoint, "success", spec.Success)
		if err != nil {
			return err
		}
		b := v.Bool()
		ep.success = &b
	}
	return nil
}

// FinishChecked scores the episode: by the evaluate endpoint when there is
// one, else by the last step's success or reward.
func (ep *httpEpisode) FinishChecked(ctx context.Context) (Score, error) {
	e := ep.env
	if ev := e.cfg.Evaluate; ev != nil {
		reply, err := e.call(ctx, "evaluate", ev, ep.vars())
		if err != nil {
			return Score{}, err
		}
		if err := ep.readScore(reply, "evaluate", ev); err != nil {
			return Score{}, err
		}
	}
	s := Score{Reward: ep.reward, Success: ep.reward >= e.cfg.SuccessReward}
	if ep.success != nil {
		s.Success = *ep.success
	}
	return s, nil
}

// Finish implements Episode for callers that cannot handle an error; the
// error is logged and the episode scores as failed.
func (ep *httpEpisode) Finish(ctx context.Context) Score {
	s, err := ep.FinishChecked(ctx)
	if err != nil {
		slog.Warn("score episode", "task", ep.task.ID, "err", err)
	}
	return s
}

// Close ends the session on the server, once.
func (ep *httpEpisode) Close(ctx context.Context) error {
	ep.closeOnce.Do(func() {
		if c := ep.env.cfg.Close; c != nil {
			_, ep.closeError = ep.env.call(ctx, "close", c, ep.vars())
		}
	})
	return ep.closeError
}
