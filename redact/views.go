package redact

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"
)

// view is a decoded form of a text. When positions are tracked, pos[i] and
// end[i] are where the unit of the text that became text[i] starts and ends
// (a %40 is one unit of three bytes).
type view struct {
	text     string
	pos, end []int
}

// tracked returns s as a view that tracks positions.
func tracked(s string) view {
	v := view{s, make([]int, len(s)), make([]int, len(s))}
	for i := range s {
		v.pos[i], v.end[i] = i, i+1
	}
	return v
}

// decoder is one decoding of a text.
type decoder struct {
	// applies reports whether the decoding can change s.
	applies func(s string) bool
	// step reads one unit at s[i] and returns the bytes it decodes to and
	// how many bytes it read.
	step func(s string, i int) (out string, n int)
	// steps, when set instead of step, returns a step for one pass, for
	// decodings that count what they read.
	steps func() func(s string, i int) (out string, n int)
	// quick, when set, decodes a whole text without positions, faster than
	// step by step.
	quick func(s string) string
}

// decode returns v decoded by d, positions following when v tracks them.
func (v view) decode(d decoder) view {
	if !d.applies(v.text) {
		return v
	}
	track := v.pos != nil
	if !track && d.quick != nil {
		return view{text: d.quick(v.text)}
	}
	var b strings.Builder
	b.Grow(len(v.text))
	var out view
	if track {
		out.pos, out.end = make([]int, 0, len(v.text)), make([]int, 0, len(v.text))
	}
	step := d.step
	if d.steps != nil {
		step = d.steps()
	}
	for i := 0; i < len(v.text); {
		dec, n := step(v.text, i)
		b.WriteString(dec)
		if track {
			for range len(dec) {
				out.pos = append(out.pos, v.pos[i])
				out.end = append(out.end, v.end[i+n-1])
			}
		}
		i += n
	}
	out.text = b.String()
	return out
}

var urlDecoded = decoder{
	applies: func(s string) bool { return strings.Contains(s, "%") },
	step: func(s string, i int) (string, int) {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			return string([]byte{unhex(s[i+1])<<4 | unhex(s[i+2])}), 3
		}
		if s[i] == '+' {
			return " ", 1
		}
		return s[i : i+1], 1
	},
}

var jsonUnescaped = decoder{
	applies: func(s string) bool { return strings.Contains(s, `\`) },
	step: func(s string, i int) (string, int) {
		if s[i] != '\\' || i+1 >= len(s) {
			return s[i : i+1], 1
		}
		switch c := s[i+1]; c {
		case 'n':
			return "\n", 2
		case 't':
			return "\t", 2
		case 'r':
			return "\r", 2
		case '"', '\\', '/':
			return string(c), 2
		}
		return s[i : i+1], 1
	},
}

var linesJoined = decoder{
	applies: func(s string) bool { return strings.ContainsAny(s, "\r\n") },
	step: func(s string, i int) (string, int) {
		if s[i] == '\n' || s[i] == '\r' {
			return "", 1
		}
		return s[i : i+1], 1
	},
	quick: joinLines,
}

// joinLines returns s without its line breaks.
func joinLines(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			i = len(s)
		}
		// A \r is rare: look for one only in the line.
		line := s[:i]
		for j := strings.IndexByte(line, '\r'); j >= 0; j = strings.IndexByte(line, '\r') {
			b.WriteString(line[:j])
			line = line[j+1:]
		}
		b.WriteString(line)
		s = s[min(i+1, len(s)):]
	}
	return b.String()
}

// Pairs of lines joined: the line breaks at even (or odd) places go, the
// others stay. A secret split across two lines is whole in one of the two
// views, and still ends at a line break there, where a rule may want a
// word boundary (an AWS key id) that joining every line takes away.
var (
	evenBreaksJoined = pairsJoined(0)
	oddBreaksJoined  = pairsJoined(1)
)

func pairsJoined(parity int) decoder {
	return decoder{
		applies: hasTokenBreak,
		steps: func() func(s string, i int) (string, int) {
			breaks := 0
			return func(s string, i int) (string, int) {
				n := 0
				for i+n < len(s) && (s[i+n] == '\n' || s[i+n] == '\r') {
					n++
				}
				if n == 0 {
					return s[i : i+1], 1
				}
				breaks++
				if breaks%2 != parity {
					return "", n
				}
				return s[i : i+n], n
			}
		},
	}
}

// hasTokenBreak reports whether a line break of s stands between two bytes
// a key may hold, where joining lines may make a secret whole.
func hasTokenBreak(s string) bool {
	for i := strings.IndexByte(s, '\n'); i >= 0; {
		before, after := i-1, i+1
		for before >= 0 && s[before] == '\r' {
			before--
		}
		for after < len(s) && (s[after] == '\r' || s[after] == '\n') {
			after++
		}
		if before >= 0 && after < len(s) && isBase64(s[before]) && isBase64(s[after]) {
			return true
		}
		next := strings.IndexByte(s[after:], '\n')
		if next < 0 {
			return false
		}
		i = after + next
	}
	return false
}

// viewChains are the views Redact searches, each a chain of decoders
// applied in order: the text itself first.
var viewChains = [][]decoder{
	nil,
	{urlDecoded},
	{jsonUnescaped},
	{jsonUnescaped, jsonUnescaped},
	// A Go error quotes (%q) what may already be JSON inside JSON.
	{jsonUnescaped, jsonUnescaped, jsonUnescaped},
	{linesJoined},
	{jsonUnescaped, linesJoined},
	{urlDecoded, linesJoined},
	{evenBreaksJoined},
	{oddBreaksJoined},
	{jsonUnescaped, evenBreaksJoined},
	{jsonUnescaped, oddBreaksJoined},
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// minBase64Token is the shortest run of base64 that may hold a key.
const minBase64Token = 24

// redactBase64 replaces every base64 token of s (a run of the standard or
// URL alphabet, with its padding) whose decoded text holds a secret.
func (r *Redactor) redactBase64(s string) (string, map[string]int) {
	var counts map[string]int
	var b strings.Builder
	last := 0
	for from := 0; from < len(s); {
		if !isBase64(s[from]) {
			from++
			continue
		}
		to := from + 1
		for to < len(s) && isBase64(s[to]) {
			to++
		}
		if to-from < minBase64Token {
			from = to
			continue
		}
		for pad := 0; pad < 2 && to < len(s) && s[to] == '='; pad++ {
			to++
		}
		if kind := r.base64Secret(s[from:to]); kind != "" {
			if counts == nil {
				counts = map[string]int{}
			}
			counts[kind]++
			b.WriteString(s[last:from])
			b.WriteString("[REDACTED:" + kind + "]")
			last = to
		}
		from = to
	}
	if last == 0 {
		return s, counts
	}
	b.WriteString(s[last:])
	return b.String(), counts
}

func isBase64(c byte) bool { return base64Alphabet[c] }

// base64Alphabet holds the bytes of the standard and the URL alphabets.
var base64Alphabet = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-") {
		t[c] = true
	}
	return t
}()

// base64Secret returns the kind of secret tok holds when decoded (the least
// by name when it holds several, so the choice is stable), or "".
func (r *Redactor) base64Secret(tok string) string {
	dec, ok := decodeBase64(tok)
	if !ok {
		return ""
	}
	_, c := r.Redact(dec)
	kind := ""
	for k := range c {
		if kind == "" || k < kind {
			kind = k
		}
	}
	return kind
}

// decodeBase64 decodes tok in any of the four base64 forms, when the result
// is printable text.
func decodeBase64(tok string) (string, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(tok)
		if err != nil || !utf8.Valid(b) {
			continue
		}
		printable := true
		for _, c := range string(b) {
			if !unicode.IsPrint(c) && !unicode.IsSpace(c) {
				printable = false
				break
			}
		}
		if printable {
			return string(b), true
		}
	}
	return "", false
}
