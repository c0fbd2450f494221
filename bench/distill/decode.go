package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/ctxopt/ctxopt/distill"
)

// row parses one line of gen's output (the train.jsonl row format). It is
// a small hand-written parser: reflection-based decoding would cost more
// than the export being measured, and DuckDB's side of the comparison parses
// with a fast native reader too. A worker decodes a block's lines with one
// decoder, which keeps its names from line to line. The row's strings other
// than its names are decoded into text, which must be at least as long as
// the line (a JSON string is at least as long as its text): the row is
// valid while text is.
func (d *decoder) row(line string, text []byte) (distill.Row, error) {
	d.s, d.i, d.text = line, 0, text[:len(line)]
	defer func() { d.text = nil }()
	var r distill.Row
	err := d.object(func(key string) error {
		var err error
		switch key {
		case "id":
			r.ID, err = d.str()
		case "prompt":
			r.Prompt, err = d.messages()
		case "completion":
			r.Completion, err = d.messages()
		case "kind":
			r.Kind, err = d.name()
		case "source":
			r.Source, err = d.name()
		case "task_id":
			r.TaskID, err = d.name()
		case "step":
			r.Step, err = d.int()
		case "guideline_id":
			r.GuidelineID, err = d.name()
		case "teacher_model":
			r.TeacherModel, err = d.name()
		case "input_tokens":
			r.InputTokens, err = d.int()
		case "output_tokens":
			r.OutputTokens, err = d.int()
		case "compression_ratio":
			var f string
			if f, err = d.number(); err == nil {
				r.CompressionRatio, err = strconv.ParseFloat(f, 64)
			}
		case "split":
			r.Split, err = d.name()
		default:
			err = fmt.Errorf("unexpected key %q", key)
		}
		return err
	})
	if err != nil {
		return r, fmt.Errorf("offset %d: %w", d.i, err)
	}
	return r, nil
}

// newDecoder returns a decoder; a worker decodes a block with one.
func newDecoder() *decoder { return &decoder{names: map[string]string{}} }

type decoder struct {
	s string // the line being decoded
	i int
	// names holds one copy of each value of the fields with few distinct
	// values (kind, task, roles...), so rows share it: no allocation per
	// row, and the Writer's dictionaries compare equal strings by pointer.
	names map[string]string
	// text holds the strings of the row being decoded, each where its JSON
	// is in the line (str).
	text []byte
	// msgs holds the messages of the rows decoded, one after another: a
	// worker lends the decoder its block's (nil: allocated as needed).
	msgs []distill.Message
}

// maxNames bounds a decoder's names, whatever the input.
const maxNames = 4096

// name reads a JSON string of a field with few distinct values, returning
// the decoder's copy when it has one: a known name costs no allocation.
func (d *decoder) name() (string, error) {
	body, escaped, err := d.span()
	if err != nil {
		return "", err
	}
	if escaped {
		if body, err = unescape(body); err != nil {
			return "", err
		}
	}
	if v, ok := d.names[body]; ok {
		return v, nil
	}
	if !escaped {
		body = strings.Clone(body)
	}
	if d.names != nil && len(d.names) < maxNames {
		d.names[body] = body
	}
	return body, nil
}

// key reads an object key. Keys are only compared, so one without escapes
// is the line's own bytes: no allocation per key.
func (d *decoder) key() (string, error) {
	body, escaped, err := d.span()
	if err != nil || !escaped {
		return body, err
	}
	return unescape(body)
}

func (d *decoder) skipSpace() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\r' || d.s[d.i] == '\n') {
		d.i++
	}
}

func (d *decoder) expect(c byte) error {
	d.skipSpace()
	if d.i >= len(d.s) || d.s[d.i] != c {
		return fmt.Errorf("want %q", c)
	}
	d.i++
	return nil
}

// peek reports whether the next non-space byte is c, consuming it if so.
func (d *decoder) peek(c byte) bool {
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *decoder) object(field func(key string) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek('}') {
		return nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		if d.peek('}') {
			return nil
		}
		if err := d.expect(','); err != nil {
			return err
		}
	}
}

func (d *decoder) messages() ([]distill.Message, error) {
	if err := d.expect('['); err != nil {
		return nil, err
	}
	if d.peek(']') {
		return nil, nil
	}
	start := len(d.msgs)
	for {
		var m distill.Message
		err := d.object(func(key string) error {
			var err error
			switch key {
			case "role":
				m.Role, err = d.name()
			case "content":
				m.Content, err = d.str()
			default:
				err = fmt.Errorf("unexpected message key %q", key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		d.msgs = append(d.msgs, m)
		if d.peek(']') {
			return d.msgs[start:len(d.msgs):len(d.msgs)], nil
		}
		if err := d.expect(','); err != nil {
			return nil, err
		}
	}
}

func (d *decoder) number() (string, error) {
	d.skipSpace()
	start := d.i
	for d.i < len(d.s) && numberByte(d.s[d.i]) {
		d.i++
	}
	if start == d.i {
		return "", errors.New("want a number")
	}
	return d.s[start:d.i], nil
}

func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (d *decoder) int() (int64, error) {
	n, err := d.number()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(n, 10, 64)
}

// str reads a JSON string into the row's text (the line is the input
// file's, mapped read-only), decoding it in one pass: gen's text has an
// escape every few dozen bytes, so a vectorized search for the closing
// quote, another for each backslash and a copy of each run between them
// cost more in calls than they saved.
func (d *decoder) str() (string, error) {
	if err := d.expect('"'); err != nil {
		return "", err
	}
	// The string goes where its JSON is in the line: its text is no longer,
	// so strings do not overlap, and the rest of the row's text is as long
	// as the rest of the line, as unquote needs. (What unquote stores past
	// the string falls where later strings go.)
	b := d.text[d.i:]
	n, w, err := unquote(b, d.s[d.i:])
	if err != nil {
		return "", err
	}
	d.i += n
	return unsafe.String(unsafe.SliceData(b), w), nil
}

// Eight bytes at a time (SWAR): a word has byte c where x = word ^ c*swarLo
// has a zero byte, and (x - swarLo) &^ x & swarHi flags it; the lowest flag
// is always a true one (a borrow only flags bytes above it).
const (
	swarLo      = 0x0101010101010101
	swarHi      = 0x8080808080808080
	backslashes = '\\' * swarLo
	quotes      = '"' * swarLo
)

// unquote decodes the JSON string at the start of s (after its opening
// quote) into b, which is at least as long as s: it returns the bytes of s
// consumed, closing quote included, and of b written. Text between escapes
// is copied a word at a time while it is searched.
func unquote(b []byte, s string) (n, w int, err error) {
	src := unsafe.Slice(unsafe.StringData(s), len(s))
	r := 0
	for {
		// w <= r, so a word stored at w stays inside b; bytes stored past
		// a quote or backslash are overwritten by what follows it.
		if haveAVX2 {
			r, w = copyRunAVX2(b, src, r, w)
		}
		for r+8 <= len(src) {
			v := binary.LittleEndian.Uint64(src[r:])
			binary.LittleEndian.PutUint64(b[w:], v)
			x, y := v^backslashes, v^quotes
			if m := ((x-swarLo)&^x | (y-swarLo)&^y) & swarHi; m != 0 {
				k := bits.TrailingZeros64(m) / 8
				r, w = r+k, w+k
				goto special
			}
			r, w = r+8, w+8
		}
		for r < len(src) && src[r] != '\\' && src[r] != '"' {
			b[w] = src[r]
			r, w = r+1, w+1
		}
		if r == len(src) {
			return 0, 0, errors.New("unterminated string")
		}
	special:
		if src[r] == '"' {
			return r + 1, w, nil
		}
		if r+1 >= len(src) {
			return 0, 0, errors.New("unterminated escape")
		}
		c := src[r+1]
		switch c {
		case '"', '\\', '/':
		case 'n':
			c = '\n'
		case 't':
			c = '\t'
		case 'r':
			c = '\r'
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'u':
			u, k, err := unicodeEscape(s[r:])
			if err != nil {
				return 0, 0, err
			}
			w += utf8.EncodeRune(b[w:], u)
			r += k
			continue
		default:
			return 0, 0, fmt.Errorf("bad escape \\%c", c)
		}
		b[w] = c
		w++
		r += 2
	}
}

// span reads a JSON string and returns its body as the line has it (escapes
// not decoded) and whether it has escapes.
func (d *decoder) span() (string, bool, error) {
	if err := d.expect('"'); err != nil {
		return "", false, err
	}
	rest := d.s[d.i:]
	end, escaped := stringEnd(rest)
	if end < 0 {
		return "", false, errors.New("unterminated string")
	}
	d.i += end + 1
	return rest[:end], escaped, nil
}

// stringEnd is the index of the quote that ends the JSON string at the start
// of s (after its opening quote), or -1, and whether the string has escapes.
func stringEnd(s string) (int, bool) {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return -1, false
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede it.
		k := i
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			return i, strings.IndexByte(s[:i], '\\') >= 0
		}
	}
}

// unescape decodes the body of a JSON string that has escapes (found by
// span) into memory of its own: keys and names, which rarely have any.
func unescape(body string) (string, error) {
	b := make([]byte, len(body)+1)
	_, w, err := unquote(b, body+`"`)
	if err != nil {
		return "", err
	}
	return string(b[:w]), nil
}

// unicodeEscape decodes \uXXXX at the start of s, with a following low
// surrogate when the first is a high one; it returns the rune and the bytes
// consumed.
func unicodeEscape(s string) (rune, int, error) {
	hex := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex(s)
	if !ok {
		return 0, 0, errors.New(`bad \u escape`)
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex(s[6:]); ok {
			if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
				return c, 12, nil
			}
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}
