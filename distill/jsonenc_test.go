package distill

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
)

// marshalStd encodes v the way the hand-written encoder must.
func marshalStd(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRowJSONMatchesEncodingJSON(t *testing.T) {
	texts := []string{
		"", "plain", `quote " backslash \ slash /`, "tab\tnewline\nreturn\r", "\b\f\x00\x01\x1f\x7f",
		"<html> & 'apostrophe'", "line\u2028sep\u2029para", "emoji 🚀 and ünïcödé", "\u00e2\u0080 near 0xE2",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab \"\\\n\t\x01<>&\u2028\u2029é🚀\u00e2")
	for range 200 {
		rs := make([]rune, rng.IntN(40))
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		texts = append(texts, string(rs))
	}
	ratios := []float64{0, 0.1989, 1, 1e-7, 3.5e21, 12345.678}
	for i, text := range texts {
		r := Row{
			ID:               text,
			Prompt:           []Message{{Role: "system", Content: text}, {Role: "user", Content: "x" + text}},
			Completion:       []Message{{Role: "assistant", Content: text + "y"}},
			Kind:             compress.KindObservation,
			Source:           SourcePAACESyn,
			TaskID:           text,
			Step:             int64(i),
			GuidelineID:      text,
			TeacherModel:     "m",
			InputTokens:      int64(i * 7),
			OutputTokens:     int64(i),
			CompressionRatio: ratios[i%len(ratios)],
			Split:            SplitValidation,
		}
		if got, want := appendRowJSON(nil, &r), marshalStd(t, &r); !bytes.Equal(got, want) {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got, want)
		}
		type weighted struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Weight  *int   `json:"weight,omitempty"`
		}
		one := 1
		std := struct {
			Messages []weighted `json:"messages"`
		}{[]weighted{{Role: "system", Content: text}, {Role: "user", Content: "x" + text}, {Role: "assistant", Content: text + "y", Weight: &one}}}
		if got, want := appendMessagesLineJSON(nil, &r), marshalStd(t, &std); !bytes.Equal(got, want) {
			t.Fatalf("messages %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
