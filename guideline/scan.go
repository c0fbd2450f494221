package guideline

import (
	"strings"
)

// This file splits a template into text and tag segments and lexes the
// inside of tags, enough to repair Jinja-isms and to find which variables a
// template references. It follows pongo2's lexer where it matters: a tag or
// variable never spans a line, strings escape only \" and \\, and {# #}
// comments are single-line.

type segKind int

const (
	segText    segKind = iota
	segVar             // {{ ... }}
	segTag             // {% ... %}
	segComment         // {# ... #}, possibly spanning lines (a Jinja-ism)
)

type segment struct {
	kind  segKind
	open  string // "{{", "{{-", "{%", "{%-", "{#"; empty for text
	inner string // text between the delimiters, or the whole text
	close string // "}}", "-}}", "%}", "-%}", "#}"
	line  int    // 1-based line of the segment's first byte
	// skip marks segments inside {% comment %} or {% verbatim %} blocks,
	// which pongo2 does not evaluate.
	skip bool
}

func (s segment) String() string { return s.open + s.inner + s.close }

// segments splits src so that joining String() of every segment gives src
// back unchanged. An unterminated or multi-line tag stays text so that
// pongo2 reports it with its own position.
func segments(src string) []segment {
	var out []segment
	line := 1
	start := 0
	emitText := func(end int) {
		if end > start {
			out = append(out, segment{kind: segText, inner: src[start:end], line: line})
			line += strings.Count(src[start:end], "\n")
		}
	}
	for i := 0; i < len(src)-1; {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		var seg segment
		var end int
		if src[i+1] == '#' {
			j := strings.Index(src[i+2:], "#}")
			if j < 0 {
				i++
				continue
			}
			seg = segment{kind: segComment, open: "{#", inner: src[i+2 : i+2+j], close: "#}"}
			end = i + 2 + j + 2
		} else {
			var ok bool
			seg, end, ok = scanTag(src, i)
			if !ok {
				i++
				continue
			}
		}
		emitText(i)
		seg.line = line
		line += strings.Count(seg.String(), "\n")
		out = append(out, seg)
		i, start = end, end
	}
	emitText(len(src))
	markSkipped(out)
	return out
}

// scanTag reads a {{ }} or {% %} starting at src[i], skipping string
// literals. It fails at a newline, as pongo2 does.
func scanTag(src string, i int) (segment, int, bool) {
	kind, closing := segVar, "}}"
	if src[i+1] == '%' {
		kind, closing = segTag, "%}"
	}
	open := src[i : i+2]
	j := i + 2
	if j < len(src) && src[j] == '-' {
		open += "-"
		j++
	}
	innerStart := j
	for j < len(src) {
		c := src[j]
		switch {
		case c == '\n':
			return segment{}, 0, false
		case c == '"' || c == '\'':
			k := j + 1
			for k < len(src) && src[k] != c && src[k] != '\n' {
				if src[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(src) || src[k] != c {
				return segment{}, 0, false
			}
			j = k + 1
		case strings.HasPrefix(src[j:], "-"+closing):
			return segment{kind: kind, open: open, inner: src[innerStart:j], close: "-" + closing}, j + 3, true
		case strings.HasPrefix(src[j:], closing):
			return segment{kind: kind, open: open, inner: src[innerStart:j], close: closing}, j + 2, true
		default:
			j++
		}
	}
	return segment{}, 0, false
}

// markSkipped flags segments that pongo2 does not evaluate: the bodies of
// {% comment %} and {% verbatim %} blocks.
func markSkipped(segs []segment) {
	end := ""
	for i := range segs {
		s := &segs[i]
		name := ""
		if s.kind == segTag {
			name = tagName(s.inner)
		}
		if end != "" {
			if name == end {
				end = ""
			} else {
				s.skip = true
			}
			continue
		}
		switch name {
		case "comment":
			end = "endcomment"
		case "verbatim":
			end = "endverbatim"
		}
	}
}

// tagName is the first identifier of a {% %} tag's inner text.
func tagName(inner string) string {
	toks := lexInner(inner)
	if len(toks) > 0 && toks[0].kind == tokIdent {
		return toks[0].text
	}
	return ""
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokSymbol
)

type token struct {
	kind  tokKind
	text  string // as written, quotes included for strings
	space string // whitespace before the token
}

// pongo2 keywords: never variables.
var keywords = map[string]bool{"in": true, "and": true, "or": true, "not": true, "true": true, "false": true, "as": true, "export": true}

// lexInner splits the inside of a tag into tokens. Trailing whitespace is
// returned as a final symbol token with empty text so joining is lossless.
func lexInner(s string) []token {
	var toks []token
	i := 0
	for {
		sp := i
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		space := s[sp:i]
		if i >= len(s) {
			if space != "" {
				toks = append(toks, token{kind: tokSymbol, space: space})
			}
			return toks
		}
		c := s[i]
		st := i
		var k tokKind
		switch {
		case isIdentStart(c):
			for i < len(s) && (isIdentStart(s[i]) || isDigit(s[i])) {
				i++
			}
			k = tokIdent
		case isDigit(c):
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			k = tokNumber
		case c == '"' || c == '\'':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i < len(s) {
				i++
			}
			k = tokString
		default:
			k = tokSymbol
			i++
			for _, two := range []string{"==", ">=", "<=", "&&", "||", "!=", "<>"} {
				if strings.HasPrefix(s[st:], two) {
					i = st + 2
					break
				}
			}
		}
		toks = append(toks, token{kind: k, text: s[st:i], space: space})
	}
}

func joinTokens(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.space)
		b.WriteString(t.text)
	}
	return b.String()
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }

// references reports the root variables an expression-bearing segment reads
// and the names it declares (loop variables, set/with targets).
func references(s segment) (reads, declares []string) {
	toks := lexInner(s.inner)
	start := 0
	if s.kind == segTag {
		if len(toks) == 0 || toks[0].kind != tokIdent {
			return nil, nil
		}
		switch name := toks[0].text; {
		case name == "for":
			start = 1
			for start < len(toks) && !toks[start].is(tokIdent, "in") {
				if toks[start].kind == tokIdent {
					declares = append(declares, toks[start].text)
				}
				start++
			}
		case name == "set":
			if len(toks) > 1 && toks[1].kind == tokIdent {
				declares = append(declares, toks[1].text)
			}
			start = 2
		case name == "with":
			for i := 1; i < len(toks); i++ {
				if toks[i].kind != tokIdent {
					continue
				}
				if i+1 < len(toks) && toks[i+1].is(tokSymbol, "=") {
					declares = append(declares, toks[i].text)
					toks[i].kind = tokSymbol // not a read
				} else if i > 0 && toks[i-1].is(tokIdent, "as") {
					declares = append(declares, toks[i].text)
					toks[i].kind = tokSymbol
				}
			}
			start = 1
		case name == "if" || name == "elif" || name == "ifequal" || name == "ifnotequal" ||
			name == "firstof" || name == "widthratio":
			start = 1
		default:
			// Tags without expressions (else, end*, autoescape, filter,
			// spaceless, comment, block, templatetag, banned ones).
			return nil, declares
		}
	}
	for i := start; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tokIdent || keywords[t.text] {
			continue
		}
		if i > 0 && (toks[i-1].is(tokSymbol, ".") || toks[i-1].is(tokSymbol, "|")) {
			continue
		}
		if s.kind == segTag && toks[0].text == "for" && (t.text == "reversed" || t.text == "sorted") {
			continue // for-tag options, not variables
		}
		if s.kind == segTag && toks[0].text == "widthratio" && i > 0 && toks[i-1].is(tokIdent, "as") {
			declares = append(declares, t.text)
			continue
		}
		reads = append(reads, t.text)
	}
	return reads, declares
}
