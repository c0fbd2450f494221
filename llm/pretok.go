package llm

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers below split text exactly as tiktoken's regular
// expressions do under regexp2 (backtracking, first matching alternative
// wins, greedy quantifiers give back one rune at a time). regexp2 takes its
// classes from the unicode package: \s is unicode.IsSpace and \p{X} is
// unicode.Categories["X"], so the same tables are used here. Text must be
// valid UTF-8: regexp2 sees invalid bytes as U+FFFD, and bpe.count replaces
// them before splitting.

// Rune classes, as bits.
const (
	cLetter  uint8 = 1 << iota // \p{L}
	cNumber                    // \p{N}
	cSpace                     // \s
	cNewline                   // \r or \n
	cUpper                     // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower                     // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
)

// classOf tests r as regexp2 does.
func classOf(r rune) uint8 {
	var c uint8
	if unicode.Is(unicode.L, r) {
		c |= cLetter
	}
	if unicode.Is(unicode.N, r) {
		c |= cNumber
	}
	if unicode.IsSpace(r) {
		c |= cSpace
	}
	if r == '\r' || r == '\n' {
		c |= cNewline
	}
	if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M) {
		c |= cUpper
	}
	if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M) {
		c |= cLower
	}
	return c
}

// bmpClasses tabulates classOf over the Basic Multilingual Plane: the
// unicode tables take tens of nanoseconds per lookup, the table one load.
// It is built on first use (some milliseconds), not at init.
var bmpClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := range rune(len(t)) {
		t[r] = classOf(r)
	}
	return &t
})

// asciiClasses is the ASCII start of bmpClasses, for the fast path.
var asciiClasses = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(len(t)) {
		t[r] = classOf(r)
	}
	return t
}()

// scanner walks one text for a pre-tokenizer.
type scanner struct {
	s   string
	bmp *[0x10000]uint8
}

// at returns the class and size of the rune at byte offset i < len(s).
func (sc *scanner) at(i int) (uint8, int) {
	if b := sc.s[i]; b < utf8.RuneSelf {
		return asciiClasses[b], 1
	}
	return sc.atRune(i)
}

// atRune is at for a multi-byte rune.
func (sc *scanner) atRune(i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(sc.s[i:])
	if r < 0x10000 {
		return sc.bmp[r], n
	}
	return classOf(r), n
}

// run returns the end of the run of runes from i that have any class bit
// in want, and the number of runes in it.
func (sc *scanner) run(i int, want uint8) (int, int) {
	k := 0
	for i < len(sc.s) {
		c, n := sc.at(i)
		if c&want == 0 {
			break
		}
		i += n
		k++
	}
	return i, k
}

// lead reports whether class c may stand before a word:
// [^\r\n\p{L}\p{N}].
func lead(c uint8) bool { return c&(cLetter|cNumber|cNewline) == 0 }

// punct reports whether class c is in [^\s\p{L}\p{N}].
func punct(c uint8) bool { return c&(cSpace|cLetter|cNumber) == 0 }

// splitFunc returns the end of the piece that starts at byte offset p < len(s).
type splitFunc func(sc *scanner, p int) int

// o200k splits as o200k_base's pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func (sc *scanner) o200k(p int) int {
	c, n := sc.at(p)
	ld := lead(c)
	// Each of the first two alternatives is tried with the lead rune taken,
	// then without it.
	if ld {
		if e := sc.lowerWord(p + n); e >= 0 {
			return sc.contraction(e)
		}
	}
	if c&(cUpper|cLower) != 0 {
		if e := sc.lowerWord(p); e >= 0 {
			return sc.contraction(e)
		}
	}
	if ld {
		if e := sc.upperWord(p + n); e >= 0 {
			return sc.contraction(e)
		}
	}
	if c&cUpper != 0 {
		if e := sc.upperWord(p); e >= 0 {
			return sc.contraction(e)
		}
	}
	// Every letter has matched by now, as upper or lower.
	if c&cNumber != 0 {
		return sc.digits(p)
	}
	return sc.rest(p, c, true)
}

// lowerWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// at i, returning its end or -1.
func (sc *scanner) lowerWord(i int) int {
	// The greedy upper run; lastLower is where the lower run would end if
	// the upper run gave back runes down to its last lower-class one.
	lastLower := -1
	for i < len(sc.s) {
		c, n := sc.at(i)
		if c&cUpper == 0 {
			break
		}
		i += n
		if c&cLower != 0 {
			lastLower = i
		}
	}
	if i < len(sc.s) {
		if c, _ := sc.at(i); c&cLower != 0 {
			e, _ := sc.run(i, cLower)
			return e
		}
	}
	// The rune after the upper run is not lower-class, so the lower run
	// ends at the last lower-class rune given back.
	return lastLower
}

// upperWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// at i, returning its end or -1.
func (sc *scanner) upperWord(i int) int {
	e, k := sc.run(i, cUpper)
	if k == 0 {
		return -1
	}
	e, _ = sc.run(e, cLower)
	return e
}

// contraction extends a word ending at e by (?i:'s|'t|'re|'ve|'m|'ll|'d)
// when one follows. regexp2 ignores case by lowering the text's rune.
func (sc *scanner) contraction(e int) int {
	s := sc.s
	if e >= len(s) || s[e] != '\'' {
		return e
	}
	r1, n1 := sc.lower(e + 1)
	switch r1 {
	case 's', 't', 'm', 'd':
		return e + 1 + n1
	case 'r', 'v', 'l':
		want := 'e'
		if r1 == 'l' {
			want = 'l'
		}
		if r2, n2 := sc.lower(e + 1 + n1); r2 == want {
			return e + 1 + n1 + n2
		}
	}
	return e
}

// lower returns the lowered rune at i and its size, or -1 past the end.
func (sc *scanner) lower(i int) (rune, int) {
	if i >= len(sc.s) {
		return -1, 0
	}
	if b := sc.s[i]; b < utf8.RuneSelf {
		return unicode.ToLower(rune(b)), 1
	}
	r, n := utf8.DecodeRuneInString(sc.s[i:])
	return unicode.ToLower(r), n
}

// digits matches \p{N}{1,3} at p, whose rune is a number.
func (sc *scanner) digits(p int) int {
	for range 3 {
		if p >= len(sc.s) {
			break
		}
		c, n := sc.at(p)
		if c&cNumber == 0 {
			break
		}
		p += n
	}
	return p
}

// rest matches the alternatives both encodings share after words and
// numbers, at p whose rune (of class c) is neither letter nor number:
//
//	 ?[^\s\p{L}\p{N}]+[\r\n]* (with / in the tail when slash)
//	|\s*[\r\n]+|\s+(?!\S)|\s+
func (sc *scanner) rest(p int, c uint8, slash bool) int {
	s := sc.s
	i := p
	if s[p] == ' ' && p+1 < len(s) {
		if c1, _ := sc.at(p + 1); punct(c1) {
			i = p + 1
		}
	}
	if i > p || punct(c) {
		for i < len(s) {
			c, n := sc.at(i)
			if !punct(c) {
				break
			}
			i += n
		}
		for i < len(s) && (s[i] == '\r' || s[i] == '\n' || slash && s[i] == '/') {
			i++
		}
		return i
	}
	// c is white space: take the greedy run, remembering where its last
	// newline ends and where its last rune starts.
	lastNL, last := -1, p
	for i < len(s) {
		c, n := sc.at(i)
		if c&cSpace == 0 {
			break
		}
		last = i
		i += n
		if c&cNewline != 0 {
			lastNL = i
		}
	}
	switch {
	case lastNL >= 0: // \s*[\r\n]+ gives back the run's tail after its last newline
		return lastNL
	case i == len(s): // \s+(?!\S) at the end of the text
		return i
	case last > p: // \s+(?!\S) gives back the last rune before the non-space
		return last
	default: // \s+
		return i
	}
}

// cl100k splits as cl100k_base's pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func (sc *scanner) cl100k(p int) int {
	if e := sc.contraction(p); e > p {
		return e
	}
	c, n := sc.at(p)
	if lead(c) {
		// Without the lead rune \p{L}+ cannot match: the lead is no letter.
		if e, k := sc.run(p+n, cLetter); k > 0 {
			return e
		}
	} else if c&cLetter != 0 {
		e, _ := sc.run(p, cLetter)
		return e
	}
	if c&cNumber != 0 {
		return sc.digits(p)
	}
	return sc.rest(p, c, false)
}
