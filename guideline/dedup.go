package guideline

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// DefaultDedupThreshold is the cosine at or above which two bullets of a
// section are duplicates (grow-and-refine).
const DefaultDedupThreshold = 0.90

// Vectorizer embeds bullet contents: the embedder role, or LexicalVectors
// when no embedder is configured.
type Vectorizer func(texts []string) ([][]float64, error)

// lexicalDims is the width of a lexical vector; collisions are rare at the
// size of a playbook's vocabulary.
const lexicalDims = 1024

// LexicalVectors is the pure-Go fallback: a hashed bag of lower-case words
// per text, so cosine measures word overlap.
func LexicalVectors(texts []string) ([][]float64, error) {
	out := make([][]float64, len(texts))
	for i, t := range texts {
		v := make([]float64, lexicalDims)
		words := strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		for _, w := range words {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%lexicalDims]++
		}
		out[i] = v
	}
	return out, nil
}

// Cosine is the cosine of two vectors, 0 when either is zero.
func Cosine(a, b []float64) float64 {
	var dot, na, nb float64
	for i := range min(len(a), len(b)) {
		dot += a[i] * b[i]
	}
	for _, x := range a {
		na += x * x
	}
	for _, x := range b {
		nb += x * x
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// Merged records one de-duplication: Dropped was folded into Kept.
type Merged struct {
	Kept    string  `json:"kept"`
	Dropped string  `json:"dropped"`
	Cosine  float64 `json:"cosine"`
}

// Dedup merges, within each section, every pair of bullets whose cosine
// is at least threshold: the older bullet keeps its id and content and
// gets the summed counters and evidence. Pairs are taken most similar
// first (ties by position), so the result does not depend on map order.
func (pb *Playbook) Dedup(round int, vec Vectorizer, threshold float64) ([]Merged, error) {
	if len(pb.Bullets) < 2 {
		return nil, nil
	}
	texts := make([]string, len(pb.Bullets))
	for i, b := range pb.Bullets {
		texts[i] = b.Content
	}
	vs, err := vec(texts)
	if err != nil {
		return nil, fmt.Errorf("dedup playbook: %w", err)
	}
	if len(vs) != len(texts) {
		return nil, fmt.Errorf("dedup playbook: %d vectors for %d bullets", len(vs), len(texts))
	}
	var out []Merged
	gone := make([]bool, len(pb.Bullets))
	for {
		bi, bj, best := -1, -1, -1.0
		for i := range pb.Bullets {
			for j := i + 1; j < len(pb.Bullets); j++ {
				if gone[i] || gone[j] || pb.Bullets[i].Section != pb.Bullets[j].Section {
					continue
				}
				if c := Cosine(vs[i], vs[j]); c >= threshold-cosineSlack && c > best {
					bi, bj, best = i, j, c
				}
			}
		}
		if bi < 0 {
			break
		}
		keep, drop := bi, bj
		if olderFirst(pb.Bullets[bj], pb.Bullets[bi]) < 0 {
			keep, drop = bj, bi
		}
		absorb(&pb.Bullets[keep], pb.Bullets[drop])
		pb.Bullets[keep].Changed = round
		gone[drop] = true
		out = append(out, Merged{Kept: pb.Bullets[keep].ID, Dropped: pb.Bullets[drop].ID, Cosine: round4(best)})
	}
	kept := pb.Bullets[:0]
	for i, b := range pb.Bullets {
		if !gone[i] {
			kept = append(kept, b)
		}
	}
	pb.Bullets = kept
	return out, nil
}

// cosineSlack absorbs rounding: a cosine computed as 0.8999999999999999
// for vectors at exactly 0.90 is at the threshold.
const cosineSlack = 1e-9

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
