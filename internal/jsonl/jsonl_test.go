package jsonl

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the read buffer
	tests := []struct {
		name    string
		in      string
		lim     Limits
		want    []string
		wantErr string
	}{
		{name: "lines", in: "a\n\nb\nc", want: []string{"a", "", "b", "c"}},
		{name: "long line within the limit", in: "a\n" + long + "\n", lim: Limits{Line: 200 << 10}, want: []string{"a", long}},
		{name: "line over the limit", in: "a\n" + long + "x\nb\n", lim: Limits{Line: 200 << 10, LineSetting: "env.max_line_bytes"}, want: []string{"a"},
			wantErr: "in.jsonl:2: line longer than the limit of 200 KiB; raise env.max_line_bytes"},
		{name: "last line without newline over the limit", in: "abcd", lim: Limits{Line: 3}, wantErr: "in.jsonl:1: line longer than the limit of 3 bytes"},
		{name: "newline does not count", in: "abc\n", lim: Limits{Line: 3}, want: []string{"abc"}},
		{name: "file over the limit", in: "ab\ncd\nef\n", lim: Limits{File: 7}, want: []string{"ab", "cd"}, wantErr: "in.jsonl:3: file longer than the limit of 7 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in), "in.jsonl", tc.lim)
			var got []string
			var err error
			for {
				var line []byte
				if line, err = r.Next(); err != nil {
					break
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("lines %q, want %q", got, tc.want)
			}
			if tc.wantErr == "" {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err %v, want EOF", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("error not final: %v", again)
			}
		})
	}
}
