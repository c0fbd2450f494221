// Package jsonl reads line-oriented files under a per-line and a per-file
// size limit, so a reader's memory stays bounded whatever the input: an
// over-long line is an error naming the file, the line and the limit, found
// without holding more than the limit in memory.
package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits bound what a Reader accepts; a zero field is unlimited.
type Limits struct {
	Line int64 // bytes in one line, without its newline
	File int64 // bytes in the whole file
	// LineSetting and FileSetting name where a user raises each limit (a
	// job field or a flag), for the error message.
	LineSetting, FileSetting string
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

// Reader yields the lines of a file one at a time.
type Reader struct {
	rd    *bufio.Reader
	name  string
	lim   Limits
	line  int
	read  int64
	buf   []byte
	fatal error
}

// NewReader reads r, named name in errors, under lim.
func NewReader(r io.Reader, name string, lim Limits) *Reader {
	return &Reader{rd: bufio.NewReaderSize(r, 64<<10), name: name, lim: lim}
}

// Line is the 1-based number of the line Next returned last.
func (r *Reader) Line() int { return r.line }

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
			return r.buf[:len(r.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(r.buf) > 0:
			return r.buf, nil
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
