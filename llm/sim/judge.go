package sim

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/templates"
)

var errNoOutputs = errors.New("judge prompt lacks the " + templates.OutputA + " and " + templates.OutputB + " markers (see docs/embedded-model.md, Judge)")

type verdict struct {
	Winner string `json:"winner"`
	Reason string `json:"reason"`
}

// judge compares the outputs marked OUTPUT_A and OUTPUT_B: more task facts
// wins, then the shorter one.
func judge(prompt string) (string, error) {
	a, b, outside, ok := judgeOutputs(prompt)
	if !ok {
		return "", errNoOutputs
	}
	qs := parseQuestions(outside)
	fa, fb := taskFacts(a, qs), taskFacts(b, qs)
	what := "task facts"
	if fa == 0 && fb == 0 {
		// Outputs of bare answers (a workflow's "step: output" lines)
		// state no fact: the one that answers more steps wins.
		fa, fb, what = answeredLines(a), answeredLines(b), "answered steps"
	}
	la, lb := utf8.RuneCountInString(strings.TrimSpace(a)), utf8.RuneCountInString(strings.TrimSpace(b))
	v := verdict{Winner: "tie"}
	switch {
	case fa != fb:
		v.Winner = "A"
		if fb > fa {
			v.Winner = "B"
		}
		v.Reason = fmt.Sprintf("A states %d %s and B %d; the one with more wins.", fa, what, fb)
	case la != lb:
		v.Winner = "A"
		if lb < la {
			v.Winner = "B"
		}
		v.Reason = fmt.Sprintf("Both state %d %s; %s is shorter (%d against %d characters).", fa, what, v.Winner, min(la, lb), max(la, lb))
	default:
		v.Reason = fmt.Sprintf("Both state %d %s and have the same length.", fa, what)
	}
	return marshalJSON(v)
}

// judgeOutputs cuts the two outputs from the prompt. Each starts on the line
// after its marker; A ends at its end marker or B's marker, B at its end
// marker or the end of the prompt.
func judgeOutputs(prompt string) (a, b, outside string, ok bool) {
	ia := strings.Index(prompt, templates.OutputA)
	ib := strings.Index(prompt, templates.OutputB)
	if ia < 0 || ib < 0 || ib < ia {
		return "", "", "", false
	}
	a = lineAfter(prompt[ia:ib])
	if e := strings.Index(a, templates.OutputAEnd); e >= 0 {
		a = a[:e]
	}
	rest := prompt[ib:]
	b = lineAfter(rest)
	tail := ""
	if e := strings.Index(b, templates.OutputBEnd); e >= 0 {
		b, tail = b[:e], b[e:]
	}
	return a, b, prompt[:ia] + "\n" + tail, true
}

// lineAfter returns s from the line after its first line.
func lineAfter(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// answeredLines counts the "key: value" lines of s whose value is neither
// empty nor unknownAnswer.
func answeredLines(s string) int {
	n := 0
	for line := range strings.Lines(s) {
		if _, v, ok := strings.Cut(line, ":"); ok {
			if v = strings.TrimSpace(v); v != "" && !strings.EqualFold(v, unknownAnswer) {
				n++
			}
		}
	}
	return n
}

// taskFacts counts the distinct facts of s that answer a question, or every
// distinct fact when there are no questions.
func taskFacts(s string, qs []question) int {
	seen := map[string]bool{}
	for _, f := range parseFacts(s) {
		if len(qs) == 0 && plausible(f) {
			seen[f.key()] = true
			continue
		}
		for _, q := range qs {
			if f.about(q) {
				seen[f.key()] = true
			}
		}
	}
	return len(seen)
}

// embeddingDims is the size of the embedder's vectors.
const embeddingDims = 256

// embed returns the L2-normalised signed hash of the word unigrams and
// bigrams of text. Text without words maps to the first unit vector.
func embed(text string) []float32 {
	var v [embeddingDims]float64
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	add := func(s string) {
		h := hashStrings("embed", s)
		if h>>63 == 1 {
			v[h%embeddingDims]--
		} else {
			v[h%embeddingDims]++
		}
	}
	for i, w := range words {
		add(w)
		if i > 0 {
			add(words[i-1] + " " + w)
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, embeddingDims)
	if norm == 0 {
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// embeddingBase64 encodes a vector the way OpenAI's encoding_format
// "base64" does: little-endian float32s.
func embeddingBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
