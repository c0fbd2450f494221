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
			if line, got := marshalDecode(t, want, map[string]string{}); !reflect.DeepEqual(got, want) {
				t.Errorf("decodeRow(%s)\n got %+v\nwant %+v", line, got, want)
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
		if _, err := decodeRow(line, nil); err == nil {
			t.Errorf("decodeRow(%s): no error", line)
		}
	}
}

// TestDecodeRowRandom holds the parser to encoding/json on random text
// made of the bytes it treats specially and ordinary ones.
func TestDecodeRowRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// One names map for all rows, as a worker decodes a block: a name seen
	// before (Kind, of few pieces, often repeats) must come back as decoded.
	names := map[string]string{}
	pieces := []string{"a", "b", " ", `"`, `\`, "\n", "\t", "\x01", "é", "中", "😀", "/", "\u2028", "<"}
	for i := range 3000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		want := distill.Row{
			ID:         fmt.Sprintf("id-%d", i),
			Prompt:     []distill.Message{{Role: "user", Content: b.String()}},
			Completion: []distill.Message{{Role: "assistant", Content: b.String()[:b.Len()/2]}},
			Kind:       b.String(),
		}
		line, got := marshalDecode(t, want, names)
		// Halving may cut a rune: json.Marshal writes U+FFFD for it.
		var back distill.Row
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, back) {
			t.Fatalf("decodeRow(%s)\n got %+v\nwant %+v", line, got, back)
		}
	}
}

// marshalDecode encodes want with encoding/json and decodes the line with
// decodeRow and names.
func marshalDecode(t *testing.T, want distill.Row, names map[string]string) ([]byte, distill.Row) {
	t.Helper()
	line, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRow(string(line), names)
	if err != nil {
		t.Fatalf("decodeRow(%s): %v", line, err)
	}
	return line, got
}
