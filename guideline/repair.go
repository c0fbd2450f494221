package guideline

import (
	"fmt"
	"sort"
	"strings"
)

// Repair is one automatic rewrite of a Jinja-ism into pongo2. From and To
// are the whole tag before and after this rewrite.
type Repair struct {
	Line   int    `json:"line"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// problem is a finding with the line it is on (0 when it has none), so that
// a syntax error pongo2 reports on the same line is not said twice.
type problem struct {
	line int
	msg  string
}

// Jinja filters whose pongo2 filter (same name unless mapped) means the same
// thing. Others with the same name differ (slice, wordwrap, truncate) and
// are left for the parser to reject.
var jinjaFilters = map[string]string{
	"default": "default", "d": "default",
	"join": "join", "length": "length", "count": "length",
	"lower": "lower", "upper": "upper", "title": "title",
	"first": "first", "last": "last", "wordcount": "wordcount",
	"striptags": "striptags", "urlencode": "urlencode",
	"escape": "escape", "e": "escape", "safe": "safe",
}

// Jinja's loop attributes and their pongo2 forloop names.
var loopAttrs = map[string]string{
	"index": "Counter", "index0": "Counter0",
	"revindex": "Revcounter", "revindex0": "Revcounter0",
	"first": "First", "last": "Last",
}

// repair rewrites the Jinja-isms whose meaning is clear and reports, as
// problems, those that would parse but render wrongly (or that pongo2
// rejects with an unhelpful message).
func repair(src string) (string, []Repair, []problem) {
	var repairs []Repair
	var probs []problem
	segs := segments(src)
	rawDepth := false
	for i := range segs {
		s := &segs[i]
		switch s.kind {
		case segComment:
			if strings.Contains(s.inner, "\n") {
				from := s.String()
				s.kind, s.open, s.close = segText, "", ""
				s.inner = "{% comment %}" + s.inner + "{% endcomment %}"
				repairs = append(repairs, Repair{Line: s.line, From: firstLine(from) + " …", To: "{% comment %} … {% endcomment %}",
					Reason: "pongo2 {# #} comments are single-line; a multi-line comment becomes a comment block"})
			}
			continue
		case segText:
			continue
		}
		if s.kind == segTag {
			switch name := tagName(s.inner); {
			case name == "raw" && !rawDepth:
				repairs = append(repairs, Repair{Line: s.line, From: s.String(), To: "{% verbatim %}", Reason: "pongo2 spells Jinja's raw block verbatim"})
				s.open, s.inner, s.close = "{%", " verbatim ", "%}"
				rawDepth = true
				continue
			case name == "endraw" && rawDepth:
				repairs = append(repairs, Repair{Line: s.line, From: s.String(), To: "{% endverbatim %}", Reason: "pongo2 spells Jinja's raw block verbatim"})
				s.open, s.inner, s.close = "{%", " endverbatim ", "%}"
				rawDepth = false
				continue
			}
		}
		if s.skip || rawDepth {
			continue
		}
		r, p := repairSegment(s)
		repairs = append(repairs, r...)
		probs = append(probs, p...)
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.String())
	}
	return b.String(), repairs, probs
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// repairSegment applies the token-level repairs to one {{ }} or {% %}.
func repairSegment(s *segment) ([]Repair, []problem) {
	var repairs []Repair
	var probs []problem
	record := func(before string, reason string) {
		repairs = append(repairs, Repair{Line: s.line, From: before, To: s.String(), Reason: reason})
	}

	if unescaped := unescapeUnderscores(s.inner); unescaped != s.inner {
		before := s.String()
		s.inner = unescaped
		record(before, `markdown-escaped underscore (\_) inside a tag`)
	}

	toks := lexInner(s.inner)
	apply := func(next []token, reason string) {
		before := s.String()
		toks = next
		s.inner = joinTokens(toks)
		record(before, reason)
	}

	// Filter calls: x | default('y') → x|default:"y".
	for i := 0; i+1 < len(toks); i++ {
		if !toks[i].is(tokSymbol, "|") || toks[i+1].kind != tokIdent {
			continue
		}
		name := toks[i+1].text
		pname, known := jinjaFilters[name]
		call := i+2 < len(toks) && toks[i+2].is(tokSymbol, "(")
		if !call {
			if known && pname != name {
				next := cloneTokens(toks)
				next[i+1].text = pname
				apply(next, fmt.Sprintf("Jinja filter %q is %q in pongo2", name, pname))
			}
			continue
		}
		arg, n, ok := filterCallArg(toks[i+2:], pname == "default")
		if !known || !ok {
			probs = append(probs, problem{s.line, fmt.Sprintf("filter call %q at line %d has no clear pongo2 form; pongo2 filters take one argument as name:\"arg\"",
				name+"("+callText(toks[i+2:])+")", s.line)})
			continue
		}
		repl := []token{{kind: tokSymbol, text: "|"}, {kind: tokIdent, text: pname}}
		if arg.text != "" {
			repl = append(repl, token{kind: tokSymbol, text: ":"}, arg)
		}
		next := append(cloneTokens(toks[:i]), repl...)
		next = append(next, toks[i+2+n:]...)
		reason := "Jinja filter call; pongo2 filters take name:arg"
		if pname != name {
			reason += fmt.Sprintf(", and Jinja filter %q is %q", name, pname)
		}
		apply(next, reason)
	}

	// loop.index → forloop.Counter and friends.
	for i := 0; i+2 < len(toks); i++ {
		if !toks[i].is(tokIdent, "loop") || (i > 0 && toks[i-1].is(tokSymbol, ".")) || !toks[i+1].is(tokSymbol, ".") || toks[i+2].kind != tokIdent {
			continue
		}
		attr := toks[i+2].text
		to, ok := loopAttrs[attr]
		if !ok {
			probs = append(probs, problem{s.line, fmt.Sprintf("Jinja loop variable \"loop.%s\" at line %d has no pongo2 equivalent (forloop has Counter, Counter0, Revcounter, Revcounter0, First, Last)", attr, s.line)})
			continue
		}
		next := cloneTokens(toks)
		next[i].text, next[i+2].text = "forloop", to
		apply(next, fmt.Sprintf("Jinja loop.%s is forloop.%s in pongo2; the Jinja name renders empty", attr, to))
	}

	// {% for k, v in x.items() %} → {% for k, v in x sorted %}.
	if s.kind == segTag && len(toks) > 0 && toks[0].is(tokIdent, "for") {
		if next, reason, ok := repairForMethod(toks); ok {
			apply(next, reason)
		}
	}

	// {{ a or 'b' }} → {{ a|default:"b" }}.
	if s.kind == segVar {
		if next, ok := repairOrDefault(toks); ok {
			apply(next, `in pongo2 "a or b" renders True/False; default gives Jinja's meaning`)
		}
	}

	probs = append(probs, constructProblems(s, toks)...)
	return repairs, probs
}

func cloneTokens(t []token) []token { return append([]token(nil), t...) }

// filterCallArg reads "(arg)" (or "()", or "(arg, true)" for default) and
// returns the pongo2 form of arg and the number of tokens consumed.
func filterCallArg(t []token, isDefault bool) (token, int, bool) {
	var none token
	if len(t) >= 2 && t[1].is(tokSymbol, ")") {
		return none, 2, true
	}
	if len(t) < 3 {
		return none, 0, false
	}
	arg := token{kind: t[1].kind, text: t[1].text}
	switch t[1].kind {
	case tokString:
		s, ok := pongoString(t[1].text)
		if !ok {
			return none, 0, false
		}
		arg.text = s
	case tokNumber, tokIdent:
		if keywords[t[1].text] {
			return none, 0, false
		}
	default:
		return none, 0, false
	}
	if t[2].is(tokSymbol, ")") {
		return arg, 3, true
	}
	// Jinja's default(x, true) also replaces falsy values, which is what
	// pongo2's default does.
	if isDefault && len(t) >= 5 && t[2].is(tokSymbol, ",") && (t[3].is(tokIdent, "true") || t[3].is(tokIdent, "True")) && t[4].is(tokSymbol, ")") {
		return arg, 5, true
	}
	return none, 0, false
}

// callText is the text of a call's arguments up to the closing parenthesis.
func callText(t []token) string {
	var b strings.Builder
	for i := 1; i < len(t) && !t[i].is(tokSymbol, ")"); i++ {
		if i > 1 {
			b.WriteString(t[i].space)
		}
		b.WriteString(t[i].text)
	}
	return b.String()
}

// pongoString converts a Jinja string literal to pongo2's, which is
// double-quoted with only \" and \\ escapes.
func pongoString(lit string) (string, bool) {
	if len(lit) < 2 || lit[len(lit)-1] != lit[0] {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return "", false
			}
			i++
			switch body[i] {
			case '\'':
				b.WriteByte('\'')
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			default:
				return "", false // \n and friends cannot be written in pongo2
			}
		case c == '"':
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), true
}

// repairForMethod drops .items() (and .keys() with one loop variable) from
// a for tag and adds sorted, since pongo2 iterates maps directly in random
// order.
func repairForMethod(toks []token) ([]token, string, bool) {
	in := -1
	vars := 0
	for i, t := range toks {
		if t.is(tokIdent, "in") {
			in = i
			break
		}
		if i > 0 && t.kind == tokIdent {
			vars++
		}
	}
	if in < 0 {
		return nil, "", false
	}
	for i := in + 1; i+3 < len(toks); i++ {
		if !toks[i].is(tokSymbol, ".") || toks[i+1].kind != tokIdent || !toks[i+2].is(tokSymbol, "(") || !toks[i+3].is(tokSymbol, ")") {
			continue
		}
		method := toks[i+1].text
		if !(method == "items" && vars == 2) && !(method == "keys" && vars == 1) {
			return nil, "", false
		}
		next := append(cloneTokens(toks[:i]), toks[i+4:]...)
		hasSorted := false
		for _, t := range next[i:] {
			if t.is(tokIdent, "sorted") {
				hasSorted = true
			}
		}
		reason := fmt.Sprintf("pongo2 iterates a map directly and .%s() renders nothing", method)
		if !hasSorted {
			// Keep trailing whitespace last.
			tail := len(next)
			if tail > 0 && next[tail-1].text == "" {
				tail--
			}
			next = append(next[:tail], append([]token{{kind: tokIdent, text: "sorted", space: " "}}, next[tail:]...)...)
			reason += "; sorted added because pongo2's map order is random"
		}
		return next, reason, true
	}
	return nil, "", false
}

// repairOrDefault rewrites an output of exactly "path or literal-or-path".
func repairOrDefault(toks []token) ([]token, bool) {
	body := toks
	var tail []token
	if n := len(body); n > 0 && body[n-1].text == "" {
		body, tail = body[:n-1], body[n-1:]
	}
	lhs := pathLen(body)
	if lhs == 0 || lhs >= len(body) || !body[lhs].is(tokIdent, "or") {
		return nil, false
	}
	rhs := body[lhs+1:]
	var arg []token
	switch {
	case len(rhs) == 1 && rhs[0].kind == tokString:
		s, ok := pongoString(rhs[0].text)
		if !ok {
			return nil, false
		}
		arg = []token{{kind: tokString, text: s}}
	case len(rhs) == 1 && rhs[0].kind == tokNumber:
		arg = []token{{kind: tokNumber, text: rhs[0].text}}
	case len(rhs) > 0 && pathLen(rhs) == len(rhs):
		arg = cloneTokens(rhs)
		arg[0].space = ""
	default:
		return nil, false
	}
	next := cloneTokens(body[:lhs])
	next = append(next, token{kind: tokSymbol, text: "|"}, token{kind: tokIdent, text: "default"}, token{kind: tokSymbol, text: ":"})
	next = append(next, arg...)
	return append(next, tail...), true
}

// pathLen is the length of a leading ident(.ident)* path, 0 if none.
func pathLen(t []token) int {
	if len(t) == 0 || t[0].kind != tokIdent || keywords[t[0].text] {
		return 0
	}
	n := 1
	for n+1 < len(t) && t[n].is(tokSymbol, ".") && t[n+1].kind == tokIdent {
		n += 2
	}
	return n
}

// constructProblems reports Jinja constructs left after repair that pongo2
// would either render silently wrong or reject with an unhelpful message.
func constructProblems(s *segment, toks []token) []problem {
	var probs []problem
	at := func(format string, args ...any) {
		probs = append(probs, problem{s.line, fmt.Sprintf(format, args...)})
	}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].is(tokSymbol, ".") && toks[i+1].kind == tokIdent && toks[i+2].is(tokSymbol, "(") {
			at("method call %q at line %d renders nothing in pongo2; use a filter (x|upper) or iterate a map directly", "."+toks[i+1].text+"()", s.line)
		}
	}
	if s.kind != segVar {
		return probs
	}
	depth := 0
	for _, t := range toks {
		switch {
		case t.is(tokSymbol, "("):
			depth++
		case t.is(tokSymbol, ")"):
			depth--
		case depth == 0 && (t.is(tokIdent, "or") || t.is(tokIdent, "and")):
			at("%q in %s at line %d renders True/False in pongo2; use |default:\"…\" or {%% if %%}", t.text, s.String(), s.line)
			return probs
		case depth == 0 && t.is(tokIdent, "if"):
			at("inline if in %s at line %d is Jinja; use {%% if %%}…{%% else %%}…{%% endif %%}", s.String(), s.line)
			return probs
		}
	}
	return probs
}

// unescapeUnderscores turns \_ into _ outside string literals: guidelines
// copied from markdown carry escaped underscores in variable names.
func unescapeUnderscores(s string) string {
	if !strings.Contains(s, `\_`) {
		return s
	}
	var b strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				b.WriteByte(c)
				i++
				c = s[i]
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '\\' && i+1 < len(s) && s[i+1] == '_':
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// sortProblems orders problems by line, keeping the order of equal lines.
func sortProblems(p []problem) {
	sort.SliceStable(p, func(i, j int) bool { return p[i].line < p[j].line })
}
