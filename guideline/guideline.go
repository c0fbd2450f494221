// Package guideline validates, repairs and stores compression guidelines:
// pongo2 templates that an LLM compressor is prompted with. Candidates
// written by an optimizer LLM are untrusted, so they are parsed in a
// sandboxed template set, Jinja-isms with a clear meaning are repaired, and
// a render with sentinel values proves every required variable reaches the
// prompt.
package guideline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flosch/pongo2/v6"

	"github.com/ctxopt/ctxopt/compress"
)

// Kind is what a guideline compresses.
type Kind string

const (
	KindHistory     Kind = compress.KindHistory
	KindObservation Kind = compress.KindObservation
)

// ParseKind accepts "history" or "observation".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindHistory, KindObservation:
		return k, nil
	}
	return "", fmt.Errorf("unknown guideline kind %q: want history or observation", s)
}

// RequiredVars lists the variables a guideline of kind must render (ACON
// 3.2: the history compressor gets the task, the previous summary and the
// history; the observation compressor the task, history and observation).
func RequiredVars(kind Kind) []string {
	switch kind {
	case KindHistory:
		return []string{compress.VarTask, compress.VarPrevSummary, compress.VarHistory}
	case KindObservation:
		return []string{compress.VarTask, compress.VarHistory, compress.VarObservation}
	}
	return nil
}

// OptionalVars are the variables a guideline of any kind may render besides
// the required ones: the plan's next steps (PAACE), filled by the
// plan-aware strategy and "(none)" elsewhere.
var OptionalVars = []string{compress.VarPlan}

// InferKind tells the kind from the variables src references: a guideline
// that uses observation but not prev_summary is an observation guideline,
// and the reverse a history one. The error says what is missing.
func InferKind(src string) (Kind, error) {
	if strings.TrimSpace(src) == "" {
		return "", errors.New("the guideline is empty")
	}
	reads := map[string]bool{}
	for _, s := range segments(src) {
		if s.kind == segVar || s.kind == segTag {
			r, _ := references(s)
			for _, v := range r {
				reads[v] = true
			}
		}
	}
	switch {
	case reads[compress.VarObservation] && !reads[compress.VarPrevSummary]:
		return KindObservation, nil
	case reads[compress.VarPrevSummary] && !reads[compress.VarObservation]:
		return KindHistory, nil
	case reads[compress.VarObservation]:
		return "", errors.New("the guideline uses both prev_summary (history) and observation (observation); give --kind history or --kind observation")
	}
	return "", fmt.Errorf("the guideline uses neither prev_summary nor observation, so its kind is unknown: a history guideline renders {{ %s }}, an observation guideline {{ %s }}; add them or give --kind",
		strings.Join(RequiredVars(KindHistory), " }}, {{ "), strings.Join(RequiredVars(KindObservation), " }}, {{ "))
}

// ReadSource reads a guideline file, at most MaxSourceBytes of it: an
// empty, oversized or unreadable file is an error naming it.
func ReadSource(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read guideline: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("read guideline %s: is a directory; give a template file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSourceBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read guideline %s: %w", path, err)
	case len(b) > MaxSourceBytes:
		return nil, fmt.Errorf("guideline %s is larger than the limit of %d bytes (%d KiB)", path, MaxSourceBytes, MaxSourceBytes>>10)
	case len(bytes.TrimSpace(b)) == 0:
		return nil, fmt.Errorf("guideline %s is empty", path)
	}
	return b, nil
}

// MaxSourceBytes bounds a guideline's source: the paper's guidelines are
// 1–3 KiB, and an optimizer that writes 32 KiB has gone astray.
const MaxSourceBytes = 32 << 10

// ID is the content id of a guideline's source: the kind's initial and the
// first 12 hex digits of the source's SHA-256, e.g. "h-3fa9c1e2b4d0".
func ID(kind Kind, src string) string {
	sum := sha256.Sum256([]byte(src))
	initial := "x"
	if kind != "" {
		initial = string(kind[0])
	}
	return initial + "-" + hex.EncodeToString(sum[:])[:12]
}

// Report says whether a guideline was accepted, what was repaired and what
// is wrong with it.
type Report struct {
	OK       bool     `json:"ok"`
	Kind     Kind     `json:"kind"`
	ID       string   `json:"id"` // content id of Repaired
	Repairs  []Repair `json:"repairs,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// Unknown lists variables the guideline reads that are not required
	// (like max_chars). They are allowed and render empty unless given.
	Unknown []string `json:"unknown,omitempty"`
	// Sections are the headings a history guideline names for its
	// summaries (Sections), which a valid summary writes one of.
	Sections []string `json:"sections,omitempty"`
	Repaired string   `json:"repaired,omitempty"` // the source after repairs
}

// String renders the report for people, one finding a line.
func (r Report) String() string {
	var b strings.Builder
	verdict := "OK"
	if !r.OK {
		verdict = "REJECTED"
	}
	fmt.Fprintf(&b, "%s %s guideline %s\n", verdict, r.Kind, r.ID)
	for _, rp := range r.Repairs {
		fmt.Fprintf(&b, "  repaired line %d: %s -> %s (%s)\n", rp.Line, rp.From, rp.To, rp.Reason)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	if len(r.Unknown) > 0 {
		fmt.Fprintf(&b, "  unknown variables (allowed, empty unless given): %s\n", strings.Join(r.Unknown, ", "))
	}
	return b.String()
}

// Template is a validated guideline, compiled. Render is safe for
// concurrent use.
type Template struct {
	kind    Kind
	id      string
	src     string
	repairs []Repair // what validation repaired, kept for the registry
	tpl     *pongo2.Template
	// sections are Report.Sections.
	sections []string
}

// SummaryContract is what the guideline asks of its summaries (for
// compress.CheckSummary): the sections it names, when it is a history
// guideline; an observation guideline asks nothing of a summary.
func (t *Template) SummaryContract() compress.SummaryContract {
	return compress.SummaryContract{Sections: t.sections}
}

// Kind returns the guideline's kind.
func (t *Template) Kind() Kind { return t.kind }

// Source returns the guideline's source after repairs.
func (t *Template) Source() string { return t.src }

// ID returns the content id of Source.
func (t *Template) ID() string { return t.id }

// Render budgets. The static subset (bound.go) already bounds a render's
// work by the source size times the input size; these stop what is left
// early and keep one bad guideline from holding a rollout.
const (
	// outputFactor bounds a render's output relative to its inputs: a
	// prompt that expands its inputs fourfold is broken.
	outputFactor = 4
	// MaxRenderInput bounds the variables of one render.
	MaxRenderInput = 16 << 20
	// RenderTimeout bounds one render's wall time.
	RenderTimeout = 2 * time.Second
)

// errBudget unwinds pongo2 from inside a write: pongo2 cannot be
// cancelled and ignores most write errors, so the writer panics and Render
// recovers.
type errBudget struct{ err error }

// Render executes the guideline. Variables that are not given render empty.
func (t *Template) Render(vars map[string]string) (out string, err error) {
	ctx := make(pongo2.Context, len(vars))
	input := 0
	for k, v := range vars {
		if !validIdent(k) {
			return "", fmt.Errorf("render guideline %s: variable name %q is not an identifier", t.id, k)
		}
		ctx[k] = v
		input += len(v)
	}
	if input > MaxRenderInput {
		return "", fmt.Errorf("render guideline %s: the variables hold %d bytes; the limit is %d", t.id, input, MaxRenderInput)
	}
	w := &budgetWriter{max: outputFactor*(input+len(t.src)) + 64<<10, deadline: time.Now().Add(RenderTimeout)}
	defer func() {
		if r := recover(); r != nil {
			if b, ok := r.(errBudget); ok {
				out, err = "", fmt.Errorf("render guideline %s: %w", t.id, b.err)
				return
			}
			out, err = "", fmt.Errorf("render guideline %s: template panicked: %v", t.id, r)
		}
	}()
	if err := t.tpl.ExecuteWriterUnbuffered(ctx, w); err != nil {
		return "", fmt.Errorf("render guideline %s: %w", t.id, err)
	}
	return w.buf.String(), nil
}

// budgetWriter keeps at most max bytes and stops the render (by panicking
// with errBudget) when it would exceed them or the deadline has passed.
type budgetWriter struct {
	buf      bytes.Buffer
	max      int
	deadline time.Time
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		panic(errBudget{fmt.Errorf("output exceeds %d bytes (%d× the input)", w.max, outputFactor)})
	}
	if time.Now().After(w.deadline) {
		panic(errBudget{fmt.Errorf("rendering took longer than %s", RenderTimeout)})
	}
	return w.buf.Write(p)
}

func validIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentStart(s[i]) && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Tags a guideline may not use, with why. pongo2 only lets a set ban tags
// and filters before its first template is created.
var bannedTags = map[string]string{
	"include":   "guidelines cannot read files",
	"import":    "guidelines cannot read files",
	"extends":   "guidelines cannot read files",
	"ssi":       "guidelines cannot read files (pongo2's ssi reads the path directly, bypassing the loader)",
	"macro":     "a recursive macro overflows the stack and kills the process",
	"cycle":     "it keeps state in the compiled template, so concurrent renders race and outputs depend on earlier renders",
	"ifchanged": "it keeps state in the compiled template, so concurrent renders race and outputs depend on earlier renders",
	"now":       "its output changes with the clock, which breaks caching and determinism",
	"lorem":     "its output is random and unbounded",
}

var bannedFilters = map[string]string{
	"random":      "its output is random, which breaks caching and determinism",
	"center":      "its width argument allocates without bound",
	"ljust":       "its width argument allocates without bound",
	"rjust":       "its width argument allocates without bound",
	"floatformat": "its precision argument allocates without bound",
}

var (
	sandboxOnce sync.Once
	sandboxSet  *pongo2.TemplateSet
	sandboxErr  error
	// pongo2's TemplateSet is not safe for concurrent template creation
	// (FromString writes set fields unguarded); execution is.
	sandboxMu sync.Mutex
)

// noFiles is a loader that cannot read anything.
type noFiles struct{}

func (noFiles) Abs(_, name string) string { return name }
func (noFiles) Get(name string) (io.Reader, error) {
	return nil, fmt.Errorf("guidelines cannot read files (%s)", name)
}

func sandbox() (*pongo2.TemplateSet, error) {
	sandboxOnce.Do(func() {
		set := pongo2.NewSet("ctxopt-guidelines", noFiles{})
		var errs []error
		for _, name := range sortedKeys(bannedTags) {
			errs = append(errs, set.BanTag(name))
		}
		for _, name := range sortedKeys(bannedFilters) {
			errs = append(errs, set.BanFilter(name))
		}
		sandboxSet, sandboxErr = set, errors.Join(errs...)
		if sandboxErr != nil {
			sandboxErr = fmt.Errorf("guideline sandbox: %w", sandboxErr)
		}
	})
	return sandboxSet, sandboxErr
}

// compile parses src in the sandbox. Prompts are not HTML, so the template
// is wrapped in an autoescape-off block: this is per template, unlike
// pongo2.SetAutoescape, which is process-wide.
func compile(src string, escapeOff bool) (tpl *pongo2.Template, err error) {
	set, err := sandbox()
	if err != nil {
		return nil, err
	}
	if escapeOff {
		src = "{% autoescape off %}" + src + "{% endautoescape %}"
	}
	sandboxMu.Lock()
	defer sandboxMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			tpl, err = nil, fmt.Errorf("pongo2 parser panicked: %v", r)
		}
	}()
	return set.FromString(src)
}

// Sentinels are distinctive values for the required variables: if one is
// missing from the output, its variable never reached the prompt. They use
// only letters, digits and underscores so escaping leaves them alone.
const sentinelPrefix = "__CTXOPT_"

func sentinel(name string) string { return sentinelPrefix + strings.ToUpper(name) + "_7F3A__" }

// Validate repairs, parses and checks src as a guideline of kind. It returns
// the compiled template when the report is OK, nil otherwise.
func Validate(kind Kind, src string) (*Template, Report) {
	rep := Report{Kind: kind, Repaired: src}
	var probs []problem
	reject := func(format string, args ...any) (*Template, Report) {
		rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		rep.ID = ID(kind, rep.Repaired)
		return nil, rep
	}
	if _, err := ParseKind(string(kind)); err != nil {
		return reject("%v", err)
	}
	if len(src) > MaxSourceBytes {
		return reject("guideline is %d bytes; the limit is %d bytes (%d KiB)", len(src), MaxSourceBytes, MaxSourceBytes>>10)
	}
	if !utf8.ValidString(src) {
		return reject("guideline is not valid UTF-8")
	}
	if strings.Contains(strings.ToUpper(src), sentinelPrefix) {
		return reject("guideline contains the reserved marker %q", sentinelPrefix)
	}
	if strings.TrimSpace(src) == "" {
		return reject("guideline is empty")
	}

	repaired, repairs, rprobs := repair(src)
	rep.Repaired, rep.Repairs, rep.ID = repaired, repairs, ID(kind, repaired)
	probs = append(probs, rprobs...)

	segs := segments(repaired)
	probs = append(probs, sandboxProblems(segs)...)
	probs = append(probs, boundProblems(segs)...)
	if _, err := compile(repaired, false); err != nil {
		if p, ok := syntaxProblem(err, probs); ok {
			probs = append(probs, p)
		}
		sortProblems(probs)
		rep.Problems = problemStrings(probs)
		// Without a parse there is no render to check, but variables that
		// are not referenced at all can still be named.
		reads, declared := scanReads(segs)
		rep.Unknown = unknownVars(reads, declared, RequiredVars(kind))
		rep.Problems = append(rep.Problems, unreferenced(kind, reads, rep.Unknown)...)
		return nil, rep
	}
	tpl, err := compile(repaired, true)
	if err != nil {
		// The unwrapped source parsed, so this is an internal failure.
		probs = append(probs, problem{0, fmt.Sprintf("compile: %v", err)})
		sortProblems(probs)
		rep.Problems = problemStrings(probs)
		return nil, rep
	}
	if kind == KindHistory {
		rep.Sections = sections(segs)
	}
	t := &Template{kind: kind, id: rep.ID, src: repaired, repairs: repairs, tpl: tpl, sections: rep.Sections}

	reads, declared := scanReads(segs)
	required := RequiredVars(kind)
	rep.Unknown = unknownVars(reads, declared, required)
	sortProblems(probs)
	rep.Problems = problemStrings(probs)
	// A template outside the bounded subset is never rendered: its render
	// could run for as long as it likes.
	if len(probs) == 0 {
		rep.Problems = append(rep.Problems, t.checkSentinels(segs, reads, rep.Unknown)...)
	}

	rep.OK = len(rep.Problems) == 0
	if !rep.OK {
		return nil, rep
	}
	return t, rep
}

// problemStrings returns each distinct message once.
func problemStrings(p []problem) []string {
	out := make([]string, 0, len(p))
	for _, x := range p {
		if !slices.Contains(out, x.msg) {
			out = append(out, x.msg)
		}
	}
	return out
}

// sandboxProblems names every banned tag and filter, where pongo2 would
// stop at the first.
func sandboxProblems(segs []segment) []problem {
	var probs []problem
	for _, s := range segs {
		if s.skip || (s.kind != segVar && s.kind != segTag) {
			continue
		}
		toks := lexInner(s.inner)
		if s.kind == segTag && len(toks) > 0 {
			if why := tagProblem(toks[0].text); why != "" {
				probs = append(probs, problem{s.line, fmt.Sprintf("tag %q at line %d is not allowed: %s", toks[0].text, s.line, why)})
			}
		}
		for i := 0; i+1 < len(toks); i++ {
			filterPos := toks[i].is(tokSymbol, "|") || (s.kind == segTag && toks[0].is(tokIdent, "filter") && i == 0)
			if !filterPos || toks[i+1].kind != tokIdent {
				continue
			}
			if why := filterProblem(toks[i+1].text); why != "" {
				probs = append(probs, problem{s.line, fmt.Sprintf("filter %q at line %d is not allowed: %s", toks[i+1].text, s.line, why)})
			}
		}
	}
	return probs
}

// syntaxProblem turns a pongo2 parse error into a problem, unless an
// earlier finding already explains that line.
func syntaxProblem(err error, known []problem) (problem, bool) {
	var pe *pongo2.Error
	if !errors.As(err, &pe) {
		return problem{0, fmt.Sprintf("syntax error: %v", err)}, true
	}
	for _, k := range known {
		if k.line == pe.Line && pe.Line > 0 {
			return problem{}, false
		}
	}
	msg := pe.Error()
	if pe.OrigError != nil {
		msg = pe.OrigError.Error()
	}
	if strings.Contains(msg, "sandbox restriction") {
		// sandboxProblems names these; reaching here means it missed one.
		msg = strings.Replace(msg, " (sandbox restriction active).", "", 1)
		return problem{pe.Line, fmt.Sprintf("at line %d: %s", pe.Line, msg)}, true
	}
	near := ""
	if pe.Token != nil && pe.Token.Val != "" && !strings.Contains(pe.Token.Val, "\n") {
		near = fmt.Sprintf(" near %q", pe.Token.Val)
	}
	return problem{pe.Line, fmt.Sprintf("syntax error at line %d, column %d%s: %s", pe.Line, pe.Column, near, msg)}, true
}

// scanReads collects the root variables the template reads and the names
// it declares (loop variables, set and with targets).
func scanReads(segs []segment) (reads []string, declared map[string]bool) {
	declared = map[string]bool{"forloop": true, "pongo2": true}
	seen := map[string]bool{}
	for _, s := range segs {
		if s.skip || (s.kind != segVar && s.kind != segTag) {
			continue
		}
		r, d := references(s)
		for _, v := range d {
			declared[v] = true
		}
		for _, v := range r {
			if !seen[v] {
				seen[v] = true
				reads = append(reads, v)
			}
		}
	}
	return reads, declared
}

func unknownVars(reads []string, declared map[string]bool, required []string) []string {
	var out []string
	for _, v := range reads {
		if !declared[v] && !slices.Contains(required, v) && !slices.Contains(OptionalVars, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// checkSentinels renders with a sentinel for each required variable and
// explains every sentinel that does not come out.
func (t *Template) checkSentinels(segs []segment, reads, unknown []string) []string {
	vars := map[string]string{}
	for _, v := range RequiredVars(t.kind) {
		vars[v] = sentinel(v)
	}
	out, err := t.Render(vars)
	if err != nil {
		return []string{fmt.Sprintf("rendering with sample values failed: %v", err)}
	}
	out = strings.ToUpper(out) // a case filter still delivers the value
	var probs []string
	for _, v := range RequiredVars(t.kind) {
		if strings.Contains(out, sentinel(v)) {
			continue
		}
		if !slices.Contains(reads, v) {
			probs = append(probs, missingVar(v, unknown))
			continue
		}
		if t.outputExecutes(segs, v) {
			probs = append(probs, fmt.Sprintf("variable %q renders empty: its value is removed before it reaches the prompt", v))
		} else {
			probs = append(probs, fmt.Sprintf("missing required variable %q: it is used only where it never renders (e.g. inside a false {%% if %%})", v))
		}
	}
	return probs
}

func missingVar(v string, unknown []string) string {
	msg := fmt.Sprintf("missing required variable %q", v)
	if near := nearest(v, unknown); near != "" {
		msg += fmt.Sprintf("; variable %q renders empty — did you mean %q?", near, v)
	}
	return msg
}

// unreferenced names the required variables that src never mentions.
func unreferenced(kind Kind, reads, unknown []string) []string {
	var probs []string
	for _, v := range RequiredVars(kind) {
		if !slices.Contains(reads, v) {
			probs = append(probs, missingVar(v, unknown))
		}
	}
	return probs
}

// outputExecutes reports whether any {{ }} that reads v runs, by rendering
// a copy with a marker in front of each such output.
func (t *Template) outputExecutes(segs []segment, v string) bool {
	const marker = "@@CTXOPT_MARK@@"
	var b strings.Builder
	found := false
	for _, s := range segs {
		if s.kind == segVar && !s.skip {
			if r, _ := references(s); slices.Contains(r, v) {
				b.WriteString(marker)
				found = true
			}
		}
		b.WriteString(s.String())
	}
	if !found {
		return false
	}
	tpl, err := compile(b.String(), true)
	if err != nil {
		return false
	}
	probe := &Template{kind: t.kind, id: t.id, src: b.String(), tpl: tpl}
	vars := map[string]string{}
	for _, name := range RequiredVars(t.kind) {
		vars[name] = sentinel(name)
	}
	out, err := probe.Render(vars)
	return err == nil && strings.Contains(strings.ToUpper(out), marker)
}

// nearest returns the candidate within edit distance 2 of want, if any.
func nearest(want string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(want, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and adjacent transpositions (histroy) cost one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
