package jsonl

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/logtest"
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
		t.Run(tc.name+" by All", func(t *testing.T) {
			var got []string
			var last error
			for line, err := range NewReader(strings.NewReader(tc.in), "in.jsonl", tc.lim).All() {
				if last != nil {
					t.Fatalf("yielded after the error %v", last)
				}
				if last = err; err == nil {
					got = append(got, string(line))
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("lines %q, want %q", got, tc.want)
			}
			if tc.wantErr == "" && last != nil || tc.wantErr != "" && (last == nil || !strings.Contains(last.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q (none at the end of the file)", last, tc.wantErr)
			}
		})
	}
}

func TestSkipTorn(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// bad is the line that does not decode; torn, whether it is left
		// out rather than an error.
		bad  int
		torn bool
	}{
		{"torn last line", "{}\n{}\n{\"a\":", 3, true},
		{"damaged line in the middle", "{}\n{\"a\":\n{}\n", 2, false},
		{"damaged last line with its newline", "{}\n{\"a\":\n", 2, false},
		// Complete JSON is never a write cut short: it is damage even
		// without its newline.
		{"complete last line that does not decode", "{}\n{}\n[1]", 3, false},
		{"torn last line that reads like a list", "{}\n{}\n[1,", 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := logtest.Capture(t, slog.LevelInfo)
			r := NewReader(strings.NewReader(tc.in), "in.jsonl", Limits{})
			for {
				line, err := r.Next()
				if err != nil {
					t.Fatalf("no bad line found: %v", err)
				}
				if err := json.Unmarshal(line, new(map[string]any)); err != nil {
					if r.Line() != tc.bad {
						t.Fatalf("line %d does not decode, want %d", r.Line(), tc.bad)
					}
					if got := r.SkipTorn(err); got != tc.torn {
						t.Errorf("SkipTorn = %v, want %v", got, tc.torn)
					}
					break
				}
			}
			warned := strings.Contains(log.String(), "file=in.jsonl line="+strconv.Itoa(tc.bad))
			if warned != tc.torn {
				t.Errorf("warning naming file and line logged: %v, want %v: %q", warned, tc.torn, log.String())
			}
		})
	}
}

func TestMend(t *testing.T) {
	long := strings.Repeat("{}\n", 40<<10) // past the Reader's read buffer
	tests := []struct {
		name, in string
		lim      Limits
		// want is the file after Mend and an append of "{}\n"; line and
		// cut what Mend returns.
		want    string
		line    int
		cut     bool
		wantErr string
	}{
		{name: "empty", in: "", want: "{}\n"},
		{name: "complete", in: "{}\n{}\n", want: "{}\n{}\n{}\n"},
		{name: "torn", in: "{}\n{}\n{\"a\":1", want: "{}\n{}\n{}\n", line: 3, cut: true},
		{name: "only a torn line", in: "{\"a\"", want: "{}\n", line: 1, cut: true},
		{name: "torn after a long file", in: long + "{\"a\"", want: long + "{}\n", line: 40<<10 + 1, cut: true},
		{name: "last line without its newline", in: "{}\n{\"a\":1}", want: "{}\n{\"a\":1}\n{}\n", line: 2},
		{name: "last line without its newline after a long file", in: long + "{\"a\":1} ", want: long + "{\"a\":1} \n{}\n", line: 40<<10 + 1},
		// Damage that ends in a newline is the readers' to report: the
		// writer leaves it.
		{name: "damaged line in the middle", in: "{}\n{\"a\":\n{}\n", want: "{}\n{\"a\":\n{}\n{}\n"},
		{name: "damaged line in the middle, torn last line", in: "{\"a\":\n{}\n{", want: "{\"a\":\n{}\n{}\n", line: 3, cut: true},
		{name: "last line over the limit", in: "{}\n{\"a\":12345}", lim: Limits{Line: 8}, wantErr: "log.jsonl:2: line longer than the limit of 8 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.jsonl")
			for _, flag := range []int{os.O_RDWR | os.O_APPEND, os.O_RDWR} {
				if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(path, flag, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				line, cut, err := Mend(f, tc.lim)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("err %v, want %q", err, tc.wantErr)
					}
					if got, _ := os.ReadFile(path); string(got) != tc.in {
						t.Errorf("file changed on an error: %q", got)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if line != tc.line || cut != tc.cut {
					t.Errorf("flag %#x: line %d cut %v, want %d %v", flag, line, cut, tc.line, tc.cut)
				}
				// The next write, at the offset Mend left, starts a line
				// of its own.
				if _, err := f.WriteString("{}\n"); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tc.want {
					t.Errorf("flag %#x: file after an append: %q, want %q", flag, got, tc.want)
				}
			}
		})
	}
}

// TestText: invalid UTF-8 and deep nesting are errors naming the line and
// the byte offsets, or, under LossyUTF8, replaced and counted; a torn last
// line cut inside a character is still left to Torn.
func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		lim      Limits
		want     string // error; "" for none
		lines    []string
		replaced int
	}{
		{name: "valid", in: "{\"a\":\"é\"}\n", lines: []string{`{"a":"é"}`}},
		{name: "invalid", in: "{}\n{\"a\":\"x\xff\xfe\"}\n", want: "f:2: invalid UTF-8 (text must be UTF-8; optimize import --lossy-utf8 replaces it, counted) at byte offset 7 of the line (10 of the file)"},
		{name: "lossy", in: "{\"a\":\"x\xff\xfe\"}\n", lim: Limits{LossyUTF8: true}, lines: []string{"{\"a\":\"x\uFFFD\uFFFD\"}"}, replaced: 2},
		{name: "torn inside a character", in: "{}\n{\"a\":\"\xc3", lines: []string{"{}", "{\"a\":\"\xc3"}},
		{name: "deep", in: "[[[1]]]\n" + `{"a":"[[[[","b":{"c":[1]}}` + "\n[[[[1]]]]\n", lim: Limits{Depth: 3, DepthSetting: "--max-depth"},
			want: "f:3: nested deeper than the limit of 3 levels (raise --max-depth if the input is meant to be this deep) at byte offset 3 of the line (38 of the file)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewReader(strings.NewReader(tc.in), "f", tc.lim)
			var got []string
			var err error
			for line, e := range rd.All() {
				if e != nil {
					err = e
					break
				}
				got = append(got, string(line))
			}
			if tc.want != "" {
				var te *TextError
				if !errors.As(err, &te) || err.Error() != tc.want {
					t.Fatalf("err %v, want %s", err, tc.want)
				}
				return
			}
			if err != nil || strings.Join(got, "\n") != strings.Join(tc.lines, "\n") || rd.Replaced() != tc.replaced {
				t.Fatalf("lines %q, replaced %d, err %v; want %q, %d", got, rd.Replaced(), err, tc.lines, tc.replaced)
			}
		})
	}
	if err := CheckText("j.yaml", []byte("a: 1\nb: x\xffy\n")); err == nil || err.Error() != "j.yaml:2: invalid UTF-8 (the file must be UTF-8 text) at byte offset 4 of the line (9 of the file)" {
		t.Errorf("CheckText: %v", err)
	}
	if err := CheckText("j.yaml", []byte("a: é\n")); err != nil {
		t.Errorf("CheckText of valid text: %v", err)
	}
}
