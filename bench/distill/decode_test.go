package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/distill"
)

// TestDecodeRow holds the hand-written parser to encoding/json on strings
// that exercise every escape.
func TestDecodeRow(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"plain", "no escapes at all"},
		{"newlines", "line one\nline two\n"},
		{"quotes and backslashes", `say "hi" \ then \\ and \"`},
		{"trailing backslash", `ends with \`},
		{"controls", "tab\tcr\rbs\bff\f\x01"},
		{"unicode", "é ü 中文 \u2028 \u2029 😀 <&>"},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := distill.Row{
				ID:               "id-1",
				Prompt:           []distill.Message{{Role: "system", Content: "s"}, {Role: "user", Content: tt.content}},
				Completion:       []distill.Message{{Role: "assistant", Content: tt.content + "!"}},
				Kind:             compress.KindHistory,
				Source:           distill.SourceACON,
				TaskID:           `task "7"`,
				Step:             3,
				InputTokens:      10,
				OutputTokens:     2,
				CompressionRatio: 0.25,
				Split:            distill.SplitTrain,
			}
			if line, got := marshalDecode(t, want, newDecoder()); !reflect.DeepEqual(got, want) {
				t.Errorf("dec.row(%s)\n got %+v\nwant %+v", line, got, want)
			}
		})
	}
}

func TestDecodeRowErrors(t *testing.T) {
	for _, line := range []string{
		`{"id":"unterminated}`,
		`{"id":"bad \q escape"}`,
		`{"id":"half \u12"}`,
		`{"nope":1}`,
	} {
		if _, err := newDecoder().row(line, make([]byte, len(line))); err == nil {
			t.Errorf("dec.row(%s): no error", line)
		}
	}
}

// TestDecodeRowRandom holds the parser to encoding/json on random text
// made of the bytes it treats specially and ordinary ones, in runs short
// and long enough for each of unquote's loops (byte, word and, where the
// CPU has AVX2, 32-byte block), with and without the block loop.
func TestDecodeRowRandom(t *testing.T) {
	pieces := []string{"a", "b", " ", `"`, `\`, "\n", "\t", "\x01", "é", "中", "😀", "/", "\u2028", "<",
		"a run of plain text longer than one block of thirty-two bytes, ", "eight b."}
	for _, blocks := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocks=%v", blocks), func(t *testing.T) {
			if blocks && !haveAVX2 {
				t.Skip("no AVX2 on this CPU")
			}
			defer func(old bool) { haveAVX2 = old }(haveAVX2)
			haveAVX2 = blocks
			r := rand.New(rand.NewPCG(1, 2))
			// One decoder for all rows, as a worker decodes a block: a
			// name seen before (Kind, of few pieces, often repeats) must
			// come back as decoded.
			dec := newDecoder()
			for i := range 3000 {
				var b strings.Builder
				for range r.IntN([]int{40, 200}[i%2]) {
					b.WriteString(pieces[r.IntN(len(pieces))])
				}
				want := distill.Row{
					ID:         fmt.Sprintf("id-%d", i),
					Prompt:     []distill.Message{{Role: "user", Content: b.String()}},
					Completion: []distill.Message{{Role: "assistant", Content: b.String()[:b.Len()/2]}},
					Kind:       b.String()[:min(b.Len(), 30)],
				}
				line, got := marshalDecode(t, want, dec)
				// Halving may cut a rune: json.Marshal writes U+FFFD for it.
				var back distill.Row
				if err := json.Unmarshal(line, &back); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, back) {
					t.Fatalf("dec.row(%s)\n got %+v\nwant %+v", line, got, back)
				}
			}
		})
	}
}

// marshalDecode encodes want with encoding/json and decodes the line with
// dec.
func marshalDecode(t *testing.T, want distill.Row, dec *decoder) ([]byte, distill.Row) {
	t.Helper()
	line, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.row(string(line), make([]byte, len(line)))
	if err != nil {
		t.Fatalf("dec.row(%s): %v", line, err)
	}
	return line, got
}
