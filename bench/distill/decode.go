package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/ctxopt/ctxopt/distill"
)

// decodeRow parses one line of gen's output (the train.jsonl row format).
// It is a small hand-written parser: reflection-based decoding would cost
// more than the export being measured, and DuckDB's side of the comparison
// parses with a fast native reader too.
func decodeRow(line string, names map[string]string) (distill.Row, error) {
	d := decoder{s: line, names: names}
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

type decoder struct {
	s string
	i int
	// names holds one copy of each value of the fields with few distinct
	// values (kind, task, roles...), so rows share it: no allocation per
	// row, and the Writer's dictionaries compare equal strings by pointer.
	names map[string]string
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
		key, err := d.str()
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
	var ms []distill.Message
	if d.peek(']') {
		return ms, nil
	}
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
		ms = append(ms, m)
		if d.peek(']') {
			return ms, nil
		}
		if err := d.expect(','); err != nil {
			return nil, err
		}
	}
}

func (d *decoder) number() (string, error) {
	d.skipSpace()
	start := d.i
	for d.i < len(d.s) && strings.IndexByte("+-.0123456789eE", d.s[d.i]) >= 0 {
		d.i++
	}
	if start == d.i {
		return "", errors.New("want a number")
	}
	return d.s[start:d.i], nil
}

func (d *decoder) int() (int64, error) {
	n, err := d.number()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(n, 10, 64)
}

// str reads a JSON string into memory of its own (the line is the input
// file's, mapped read-only). Escaped ones are decoded in one pass after the
// closing quote is found with IndexByte (vectorized): the generated text has
// an escaped newline every few dozen bytes, and scanning it byte by byte
// twice cost as much as encoding the Parquet.
func (d *decoder) str() (string, error) {
	body, escaped, err := d.span()
	if err != nil || !escaped {
		return strings.Clone(body), err
	}
	return unescape(body)
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

// unescape decodes the body of a JSON string that has escapes into memory
// of its own. The decoded text is at most as long as the escaped one, so
// one buffer of that size takes it, written by index.
func unescape(s string) (string, error) {
	b := make([]byte, len(s))
	w := 0
	for r := 0; ; {
		j := strings.IndexByte(s[r:], '\\')
		if j < 0 {
			w += copy(b[w:], s[r:])
			return unsafe.String(unsafe.SliceData(b), w), nil
		}
		w += copy(b[w:], s[r:r+j])
		r += j
		if r+1 >= len(s) {
			return "", errors.New("unterminated escape")
		}
		c := s[r+1]
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
			u, n, err := unicodeEscape(s[r:])
			if err != nil {
				return "", err
			}
			w += utf8.EncodeRune(b[w:], u)
			r += n
			continue
		default:
			return "", fmt.Errorf("bad escape \\%c", c)
		}
		b[w] = c
		w++
		r += 2
	}
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
