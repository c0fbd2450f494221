package contrastive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// extractJSON finds the analysis object in a reply: inside a code fence if
// there is one, else the first balanced {...} in the text that is valid
// JSON, so prose around the object does not matter.
func extractJSON(reply string) (string, error) {
	for _, block := range fenced(reply) {
		if obj, err := firstObject(block); err == nil {
			return obj, nil
		}
	}
	return firstObject(reply)
}

// fenced returns the contents of ``` fences, language tag dropped.
func fenced(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			return out
		}
		rest := s[i+3:]
		j := strings.Index(rest, "```")
		if j < 0 {
			// An unclosed fence: the reply was cut or the model forgot it.
			return append(out, dropTag(rest))
		}
		out = append(out, dropTag(rest[:j]))
		s = rest[j+3:]
	}
}

// dropTag removes a fence's language tag ("json") up to the line end.
func dropTag(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.Contains(s[:nl], "{") {
		return s[nl+1:]
	}
	return s
}

func firstObject(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] != '{' || !opensObject(s[i+1:]) {
			continue
		}
		end, closed := matchBrace(s, i)
		if !closed {
			// Every later candidate starts inside this object.
			return "", errors.New("the JSON object is not closed (the reply looks cut off)")
		}
		if cand := s[i : end+1]; gjson.Valid(cand) {
			return cand, nil
		}
	}
	return "", errors.New("the reply holds no valid JSON object")
}

// opensObject reports whether the text after a '{' starts a key, as an
// analysis object does and prose braces (or an empty {}) do not.
func opensObject(rest string) bool {
	rest = strings.TrimLeft(rest, " \t\r\n")
	return rest != "" && rest[0] == '"'
}

// matchBrace returns the index of the brace closing the one at open,
// skipping braces inside JSON strings.
func matchBrace(s string, open int) (int, bool) {
	depth := 0
	inStr, esc := false, false
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}

// jsonType is what a key of the schema must hold.
type jsonType int

const (
	tString jsonType = iota
	tArray
	tBool
	tNumber
	tIntOrNull
	tNumberOrNull
)

func (t jsonType) String() string {
	return [...]string{"a string", "an array", "true or false", "a number", "an integer or null", "a number or null"}[t]
}

func (t jsonType) matches(r gjson.Result) bool {
	switch t {
	case tString:
		return r.Type == gjson.String
	case tArray:
		return r.IsArray()
	case tBool:
		return r.IsBool()
	case tNumber:
		return r.Type == gjson.Number
	case tIntOrNull:
		return r.Type == gjson.Null || (r.Type == gjson.Number && r.Float() == float64(r.Int()))
	case tNumberOrNull:
		return r.Type == gjson.Null || r.Type == gjson.Number
	}
	return false
}

type field struct {
	key string
	typ jsonType
}

// utSchema is ACON G.1's answer, in its order.
var utSchema = []field{
	{"task_name", tString},
	{"divergence_step_description", tString},
	{"root_cause_categories", tArray},
	{"missing_or_distorted_facts", tArray},
	{"summary_inaccuracies", tArray},
	{"lost_state_variables", tArray},
	{"api_or_action_errors", tArray},
	{"inefficiency_patterns", tArray},
	{"timeline_of_divergence", tArray},
	{"performance_regression", tBool},
	{"baseline_env_steps", tIntOrNull},
	{"optimized_env_steps", tIntOrNull},
	{"step_ratio", tNumberOrNull},
	{"remediation_recommendations", tArray},
	{"recovery_opportunities_missed", tArray},
	{"reliability_score", tNumber},
	{"concise_failure_mechanism_summary", tString},
}

// parseReply extracts and checks the analysis of step from a reply. The
// error says what is wrong in words the repair request passes on.
func parseReply(step, reply string) (gjson.Result, error) {
	obj, err := extractJSON(reply)
	if err != nil {
		return gjson.Result{}, err
	}
	r := gjson.Parse(obj)
	var problems []string
	if step == StepUT {
		problems = checkUT(r)
	} else {
		problems = checkCO(r)
	}
	if len(problems) > 0 {
		return r, errors.New(strings.Join(problems, "; "))
	}
	return r, nil
}

func checkUT(r gjson.Result) []string {
	var p []string
	for _, f := range utSchema {
		v := r.Get(f.key)
		switch {
		case !v.Exists():
			p = append(p, fmt.Sprintf("key %q is missing", f.key))
		case !f.typ.matches(v):
			p = append(p, fmt.Sprintf("key %q must be %s, not %s", f.key, f.typ, describe(v)))
		}
	}
	p = append(p, stringItems(r, "root_cause_categories")...)
	p = append(p, stringItems(r, "remediation_recommendations")...)
	for i, it := range r.Get("missing_or_distorted_facts").Array() {
		if !it.IsObject() && it.Type != gjson.String {
			p = append(p, fmt.Sprintf("missing_or_distorted_facts[%d] must be an object with \"baseline\", not %s", i, describe(it)))
		}
	}
	if s := r.Get("reliability_score"); s.Type == gjson.Number && (s.Float() < 0 || s.Float() > 1) {
		p = append(p, fmt.Sprintf("reliability_score %g is outside [0, 1]", s.Float()))
	}
	return p
}

func checkCO(r gjson.Result) []string {
	var p []string
	for _, key := range []string{"removals", "keeps", "rules"} {
		v := r.Get(key)
		switch {
		case !v.Exists():
			p = append(p, fmt.Sprintf("key %q is missing", key))
		case !v.IsArray():
			p = append(p, fmt.Sprintf("key %q must be an array, not %s", key, describe(v)))
		}
	}
	for i, it := range r.Get("removals").Array() {
		if !it.IsObject() || it.Get("pattern").Type != gjson.String {
			p = append(p, fmt.Sprintf("removals[%d] must be an object with a string \"pattern\" (and \"category\", \"action\")", i))
		}
	}
	for i, it := range r.Get("keeps").Array() {
		if !it.IsObject() {
			p = append(p, fmt.Sprintf("keeps[%d] must be an object with \"reason\" and \"evidence_spans\"", i))
		} else if ev := it.Get("evidence_spans"); ev.Exists() && !ev.IsArray() {
			p = append(p, fmt.Sprintf("keeps[%d].evidence_spans must be an array of strings", i))
		}
	}
	p = append(p, stringItems(r, "rules")...)
	if o := r.Get("overview"); o.Exists() && !o.IsObject() {
		p = append(p, fmt.Sprintf("key \"overview\" must be an object, not %s", describe(o)))
	}
	return p
}

func stringItems(r gjson.Result, key string) []string {
	var p []string
	for i, it := range r.Get(key).Array() {
		if it.Type != gjson.String {
			p = append(p, fmt.Sprintf("%s[%d] must be a string, not %s", key, i, describe(it)))
		}
	}
	return p
}

func describe(v gjson.Result) string {
	switch {
	case v.IsArray():
		return "an array"
	case v.IsObject():
		return "an object"
	case v.IsBool():
		return "a boolean"
	}
	switch v.Type {
	case gjson.String:
		return "a string"
	case gjson.Number:
		return "a number"
	case gjson.Null:
		return "null"
	}
	return "something else"
}

// fill copies the parsed analysis and the parts the update prompts show
// into f.
func fill(f *Feedback, step string, r gjson.Result) {
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(r.Raw)) == nil {
		f.Analysis = json.RawMessage(compact.Bytes())
	}
	if step == StepUT {
		fillUT(f, r)
	} else {
		fillCO(f, r)
	}
}

func fillUT(f *Feedback, r gjson.Result) {
	f.RootCauses = strs(r.Get("root_cause_categories"))
	f.Recommendations = strs(r.Get("remediation_recommendations"))
	for _, it := range r.Get("missing_or_distorted_facts").Array() {
		if it.Type == gjson.String {
			f.MissingFacts = appendLine(f.MissingFacts, it.String())
			continue
		}
		fact := it.Get("baseline").String()
		if fact == "" {
			fact = it.Get("optimized_context_absent_or_changed").String()
		}
		f.MissingFacts = appendLine(f.MissingFacts, fact)
	}
	for _, it := range r.Get("lost_state_variables").Array() {
		name := oneLine(it.Get("name_or_pattern").String())
		if issue := oneLine(it.Get("optimized_issue").String()); issue != "" {
			name += ": " + issue
		}
		f.MissingFacts = appendLine(f.MissingFacts, "state "+name)
	}
	f.Reliability = r.Get("reliability_score").Float()

	ov := func(format string, args ...any) { f.Overview = appendLine(f.Overview, fmt.Sprintf(format, args...)) }
	if s := r.Get("divergence_step_description").String(); s != "" {
		ov("divergence: %s", s)
	}
	if len(f.RootCauses) > 0 {
		ov("root causes: %s", strings.Join(f.RootCauses, ", "))
	}
	if s := r.Get("concise_failure_mechanism_summary").String(); s != "" {
		ov("mechanism: %s", s)
	}
	if r.Get("performance_regression").Bool() {
		ov("performance regression: baseline %s steps, compressed %s steps", r.Get("baseline_env_steps").Raw, r.Get("optimized_env_steps").Raw)
	}
	for _, it := range r.Get("inefficiency_patterns").Array() {
		if p := it.Get("pattern").String(); p != "" {
			ov("inefficiency: %s (excess steps: %d)", p, it.Get("excess_steps").Int())
		}
	}
	ov("reliability: %.2f", f.Reliability)
}

func fillCO(f *Feedback, r gjson.Result) {
	for _, it := range r.Get("removals").Array() {
		rm := Removal{
			Category: oneLine(it.Get("category").String()),
			Pattern:  oneLine(it.Get("pattern").String()),
			Action:   oneLine(it.Get("action").String()),
		}
		if rm.Pattern != "" {
			f.Removals = append(f.Removals, rm)
		}
	}
	for _, it := range r.Get("keeps").Array() {
		k := Keep{Reason: oneLine(it.Get("reason").String()), Evidence: strs(it.Get("evidence_spans"))}
		if k.Reason != "" || len(k.Evidence) > 0 {
			f.Keeps = append(f.Keeps, k)
		}
	}
	f.Rules = strs(r.Get("rules"))
	o := r.Get("overview")
	rel := o.Get("reliability_score")
	if !rel.Exists() {
		rel = r.Get("reliability_score")
	}
	f.Reliability = rel.Float()
	// Object keys come sorted so the prompt is the same for the same answer.
	m := o.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		text := v.String()
		if v.IsArray() || v.IsObject() {
			text = v.Raw
		}
		f.Overview = appendLine(f.Overview, k+": "+text)
	}
}

// strs returns the non-empty strings of an array, each on one line.
func strs(r gjson.Result) []string {
	var out []string
	for _, it := range r.Array() {
		out = appendLine(out, it.String())
	}
	return out
}

func appendLine(out []string, s string) []string {
	if s = oneLine(s); s != "" {
		out = append(out, s)
	}
	return out
}

// oneLine collapses whitespace, newlines included: each rule and fact must
// stay on its own line of the update prompt, which the optimizer reads line
// by line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
