package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/distill"
)

// decodeRow parses one line of gen's output (the train.jsonl row format).
// It is a small hand-written parser: reflection-based decoding would cost
// more than the export being measured, and DuckDB's side of the comparison
// parses with a fast native reader too.
func decodeRow(line string) (distill.Row, error) {
	d := decoder{s: line}
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
			r.Kind, err = d.str()
		case "source":
			r.Source, err = d.str()
		case "task_id":
			r.TaskID, err = d.str()
		case "step":
			r.Step, err = d.int()
		case "guideline_id":
			r.GuidelineID, err = d.str()
		case "teacher_model":
			r.TeacherModel, err = d.str()
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
			r.Split, err = d.str()
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
				m.Role, err = d.str()
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

// str reads a JSON string into memory of its own (the line's buffer is
// reused once decoded). Escaped ones are decoded in one pass after the
// closing quote is found with IndexByte (vectorized): the generated text has
// an escaped newline every few dozen bytes, and scanning it byte by byte
// twice cost as much as encoding the Parquet.
func (d *decoder) str() (string, error) {
	if err := d.expect('"'); err != nil {
		return "", err
	}
	rest := d.s[d.i:]
	end, escaped := stringEnd(rest)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	d.i += end + 1
	if escaped {
		return unescape(rest[:end])
	}
	return strings.Clone(rest[:end]), nil
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

// unescape decodes the body of a JSON string that has escapes. The decoded
// text is at most as long as the escaped one: the builder is sized once, so
// it neither grows nor copies when done.
func unescape(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\\')
		if j < 0 {
			b.WriteString(s[i:])
			return b.String(), nil
		}
		b.WriteString(s[i : i+j])
		i += j
		if i+1 >= len(s) {
			return "", errors.New("unterminated escape")
		}
		c := s[i+1]
		switch c {
		case '"', '\\', '/':
			b.WriteByte(c)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, n, err := unicodeEscape(s[i:])
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
			i += n
			continue
		default:
			return "", fmt.Errorf("bad escape \\%c", c)
		}
		i += 2
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
