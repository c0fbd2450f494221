// Package jsonl reads line-oriented files under a per-line and a per-file
// size limit, so a reader's memory stays bounded whatever the input: an
// over-long line is an error naming the file, the line and the limit, found
// without holding more than the limit in memory.
//
// It also holds the format's one rule for a torn line (Torn), which every
// reader and writer of appended JSONL files follows. Appends are
// line-complete (one write per line, newline included), so only the last
// line can lack its newline. When it is complete JSON it is a record whose
// newline was not written: readers keep it, and a writer ends it before
// appending (Mend). When it is not, the write was cut short (the writer
// was killed, or is still writing): readers leave it out with a warning
// and a writer cuts it off, so its next line is not glued to it. Any other
// bad line is damage, an error naming the file and line.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"unicode/utf8"
)

// Limits bound what a Reader accepts; a zero field is unlimited.
type Limits struct {
	Line int64 // bytes in one line, without its newline
	File int64 // bytes in the whole file
	// Depth bounds the nesting of arrays and objects in one line: decoders
	// recurse, and no record of ours nests deeper than a dozen levels.
	Depth int
	// LineSetting, FileSetting and DepthSetting name where a user raises
	// each limit (a job field or a flag), for the error message.
	LineSetting, FileSetting, DepthSetting string
	// LossyUTF8 replaces each invalid UTF-8 sequence with U+FFFD (counted,
	// Reader.Replaced) instead of failing: text is never rewritten
	// silently.
	LossyUTF8 bool
}

// LimitError reports a line or a file over its limit.
type LimitError struct {
	File    string
	Line    int    // 1-based line where the limit was passed
	What    string // "line" or "file"
	Limit   int64
	Setting string
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("%s:%d: %s longer than the limit of %s", e.File, e.Line, e.What, formatBytes(e.Limit))
	if e.Setting != "" {
		msg += "; raise " + e.Setting + " if the input is meant to be this large"
	}
	return msg
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// TextError is a line that is not text a reader accepts: invalid UTF-8, or
// nested deeper than the limit.
type TextError struct {
	File string
	Line int
	// Offset is the byte offset in the line (0-based), FileOffset in the file.
	Offset, FileOffset int64
	Msg                string
}

func (e *TextError) Error() string {
	return fmt.Sprintf("%s:%d: %s at byte offset %d of the line (%d of the file)", e.File, e.Line, e.Msg, e.Offset, e.FileOffset)
}

// InvalidUTF8 returns the offset of the first byte of b that is not valid
// UTF-8, or -1 when b is valid.
func InvalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// CheckText reports the first invalid UTF-8 byte of data, a whole file named
// name, as a *TextError with its line; nil when data is valid.
func CheckText(name string, data []byte) error {
	off := InvalidUTF8(data)
	if off < 0 {
		return nil
	}
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return &TextError{File: name, Line: bytes.Count(data[:off], []byte{'\n'}) + 1, Offset: int64(off - start), FileOffset: int64(off),
		Msg: "invalid UTF-8 (the file must be UTF-8 text)"}
}

// Lossy replaces each invalid UTF-8 byte of b with U+FFFD and returns how
// many it replaced (Limits.LossyUTF8).
func Lossy(b []byte) ([]byte, int) {
	var out []byte
	n := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
			n++
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out, n
}

// depthAt returns the offset where b, JSON text, opens its (limit+1)th
// level of nested arrays or objects, or -1.
func depthAt(b []byte, limit int) int {
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return i
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return -1
}

// Reader yields the lines of a file one at a time.
type Reader struct {
	rd    *bufio.Reader
	name  string
	lim   Limits
	line  int
	read  int64
	buf   []byte
	fatal error
	// replaced counts the invalid UTF-8 bytes LossyUTF8 replaced.
	replaced int
	// unterminated: the line Next returned last ended the file without
	// its newline.
	unterminated bool
}

// NewReader reads r, named name in errors, under lim.
func NewReader(r io.Reader, name string, lim Limits) *Reader {
	return &Reader{rd: bufio.NewReaderSize(r, 64<<10), name: name, lim: lim}
}

// Line is the 1-based number of the line Next returned last.
func (r *Reader) Line() int { return r.line }

// Offset is the number of bytes of the file read through the line Next
// returned last, its newline included: where the next line begins, whatever
// LossyUTF8 replaced in the lines returned.
func (r *Reader) Offset() int64 { return r.read }

// Replaced is the number of invalid UTF-8 bytes replaced so far
// (Limits.LossyUTF8).
func (r *Reader) Replaced() int { return r.replaced }

// check applies the text rules to line, which ends at file offset end
// (its newline excluded), and returns it, repaired under LossyUTF8. A torn
// last line is left to Torn: a cut may split a character.
func (r *Reader) check(line []byte, end int64) ([]byte, error) {
	if r.unterminated && Torn(line) {
		return line, nil
	}
	start := end - int64(len(line))
	if off := InvalidUTF8(line); off >= 0 {
		if !r.lim.LossyUTF8 {
			return nil, r.fail(&TextError{File: r.name, Line: r.line, Offset: int64(off), FileOffset: start + int64(off),
				Msg: "invalid UTF-8 (text must be UTF-8; optimize import --lossy-utf8 replaces it, counted)"})
		}
		var n int
		line, n = Lossy(line)
		r.replaced += n
	}
	if r.lim.Depth > 0 {
		if off := depthAt(line, r.lim.Depth); off >= 0 {
			msg := fmt.Sprintf("nested deeper than the limit of %d levels", r.lim.Depth)
			if r.lim.DepthSetting != "" {
				msg += " (raise " + r.lim.DepthSetting + " if the input is meant to be this deep)"
			}
			return nil, r.fail(&TextError{File: r.name, Line: r.line, Offset: int64(off), FileOffset: start + int64(off), Msg: msg})
		}
	}
	return line, nil
}

// Next returns the next line without its newline (valid until the next
// call), or io.EOF after the last one. Errors other than io.EOF are final.
func (r *Reader) Next() ([]byte, error) {
	if r.fatal != nil {
		return nil, r.fatal
	}
	r.line++
	r.buf = r.buf[:0]
	for {
		chunk, err := r.rd.ReadSlice('\n')
		r.read += int64(len(chunk))
		if r.lim.File > 0 && r.read > r.lim.File {
			return nil, r.fail(&LimitError{File: r.name, Line: r.line, What: "file", Limit: r.lim.File, Setting: r.lim.FileSetting})
		}
		n := int64(len(r.buf) + len(chunk))
		if err == nil {
			n-- // the newline
		}
		if r.lim.Line > 0 && n > r.lim.Line {
			return nil, r.fail(&LimitError{File: r.name, Line: r.line, What: "line", Limit: r.lim.Line, Setting: r.lim.LineSetting})
		}
		r.buf = append(r.buf, chunk...)
		switch {
		case err == nil:
			return r.check(r.buf[:len(r.buf)-1], r.read-1)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(r.buf) > 0:
			r.unterminated = true
			return r.check(r.buf, r.read)
		case errors.Is(err, io.EOF):
			r.line--
			return nil, r.fail(io.EOF)
		default:
			return nil, r.fail(fmt.Errorf("read %s: %w", r.name, err))
		}
	}
}

func (r *Reader) fail(err error) error {
	r.fatal = err
	return err
}

// All yields the lines Next returns, as Next does, and ends at io.EOF;
// another error is yielded last.
func (r *Reader) All() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(line, err) || err != nil {
				return
			}
		}
	}
}

// NonBlank returns the next line that is not blank, trimmed of surrounding
// space, or io.EOF.
func (r *Reader) NonBlank() ([]byte, error) {
	for {
		line, err := r.Next()
		if err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			return t, nil
		}
	}
}

// Unterminated reports whether the line Next returned last ended the file
// without its newline. Torn says whether such a line is torn.
func (r *Reader) Unterminated() bool { return r.unterminated }

// Torn reports whether the line Next returned last is a torn last line
// (see the package's Torn): readers that decode later than they read note
// it with the line.
func (r *Reader) Torn() bool { return r.unterminated && Torn(r.buf) }

// Torn reports whether last, the final line of a file, which ends without
// its newline, is a write cut short. Records are JSON objects written with
// their newline in one write, and no cut-short object is complete JSON; a
// last line that is complete JSON but not a valid record is damage.
func Torn(last []byte) bool { return !json.Valid(last) }

// SkipTorn reports whether the line Next returned last, which did not
// decode (err), is a torn last line, and then logs that it is left out.
// The caller stops reading before it; any other bad line is its error.
func (r *Reader) SkipTorn(err error) bool {
	if !r.Torn() {
		return false
	}
	WarnTorn(r.name, r.line, err)
	return true
}

// WarnTorn logs that line, the torn last line of file, is left out.
func WarnTorn(file string, line int, err error) {
	slog.Warn("leaving out the torn last line of a JSONL file (a write cut short)", "file", file, "line", line, "err", err)
}

// Mend readies f, a JSONL file open for reading and writing, for appending
// (any file offset; O_APPEND or not). A last line without its newline is
// ended with one when it is complete JSON and cut off when it is torn
// (Torn), so the next line appended is a line of its own. It returns that
// line's number, 0 when the file is empty or ends in a newline, and
// whether the line was cut off. It reads f under lim only when the last
// byte is not a newline; on an error f is left as it was. On success f's
// offset is at its end.
func Mend(f *os.File, lim Limits) (line int, cut bool, err error) {
	line, cut, err = mend(f, lim)
	if err != nil {
		return 0, false, err
	}
	// Without O_APPEND the next write goes to the offset, which may be
	// anywhere (0 when just opened, past the end after a cut).
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return 0, false, fmt.Errorf("seek %s: %w", f.Name(), err)
	}
	return line, cut, nil
}

func mend(f *os.File, lim Limits) (line int, cut bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	size := fi.Size()
	if size == 0 {
		return 0, false, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return 0, false, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if last[0] == '\n' {
		return 0, false, nil
	}
	rd := NewReader(io.NewSectionReader(f, 0, size), f.Name(), lim)
	var start int64 // where the line Next returns next begins
	for l, err := range rd.All() {
		if err != nil {
			return 0, false, err
		}
		if !rd.Unterminated() {
			start += int64(len(l)) + 1
			continue
		}
		if rd.Torn() {
			if err := f.Truncate(start); err != nil {
				return 0, false, fmt.Errorf("truncate %s: %w", f.Name(), err)
			}
			return rd.Line(), true, nil
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return 0, false, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return 0, false, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		return rd.Line(), false, nil
	}
	// The unterminated last line comes before io.EOF.
	return 0, false, fmt.Errorf("read %s: the file shrank while it was read", f.Name())
}
