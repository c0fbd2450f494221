package env

import (
	"math"
	"slices"
	"sync"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"What is the capital of Veloria?", []string{"what", "is", "the", "capital", "of", "veloria"}},
		{"Veloria's founding year is 1187.", []string{"veloria", "s", "founding", "year", "is", "1187"}},
		{"  --  ", nil},
		{"Ünïcode-Name", []string{"ünïcode", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := tokenize(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBM25Search(t *testing.T) {
	docs := []string{
		0: "Veloria is a quiet region of hills.",
		1: "The capital of Veloria is Marnth. Veloria lies by the sea.",
		2: "The capital of Ostrel is Dunmere.",
		3: "Ostrel and Veloria Minor trade wool.",
		4: "A region of hills.",
		5: "A region of hills.",
	}
	ix := newBM25(docs)
	tests := []struct {
		name  string
		query string
		k     int
		want  []int
	}{
		{"entity and relation beat either alone", "What is the capital of Veloria?", 3, []int{1, 2, 0}},
		{"rare term first", "Marnth", 3, []int{1}},
		{"k limits; the shorter document wins", "capital", 1, []int{2}},
		{"ties go to the lower document", "hills", 3, []int{4, 5, 0}},
		{"repeated query terms count once", "hills hills hills", 3, []int{4, 5, 0}},
		{"no known term", "zzz", 3, nil},
		{"empty query", "", 3, nil},
		{"k zero", "capital", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, h := range ix.search(tt.query, tt.k) {
				got = append(got, h.doc)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("search(%q, %d) = %v, want %v", tt.query, tt.k, got, tt.want)
			}
		})
	}
}

// TestBM25Score checks one score against the formula by hand.
func TestBM25Score(t *testing.T) {
	ix := newBM25([]string{"a b", "a c c", "d"})
	got := ix.search("c", 1)
	// df(c)=1, N=3, tf=2, |d|=3, avgdl=2.
	idf := math.Log(1 + (3-1+0.5)/(1+0.5))
	want := idf * 2 * (1.2 + 1) / (2 + 1.2*(1-0.75+0.75*3.0/2))
	if len(got) != 1 || got[0].doc != 1 || math.Abs(got[0].score-want) > 1e-12 {
		t.Fatalf("search(c) = %+v, want doc 1 with score %v", got, want)
	}
}

func TestBM25Concurrent(t *testing.T) {
	q := loadEmbedded(t)
	queries := []string{"What is the capital of Veloria?", "harbour fog", "founding year", "legend fox"}
	want := make([][]hit, len(queries))
	for i, s := range queries {
		want[i] = q.searchIndex().search(s, 5)
	}
	// A fresh environment, so the goroutines also race to build the index.
	q = loadEmbedded(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(queries)
				if got := q.searchIndex().search(queries[k], 5); !slices.Equal(got, want[k]) {
					t.Errorf("concurrent search(%q) = %v, want %v", queries[k], got, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkBM25Build indexes the bundled corpus (the budget is 100 ms).
func BenchmarkBM25Build(b *testing.B) {
	q := loadEmbedded(b)
	docs := make([]string, len(q.data.passages))
	for i, p := range q.data.passages {
		docs[i] = p.Title + "\n" + p.Text
	}
	b.ResetTimer()
	for range b.N {
		newBM25(docs)
	}
	b.ReportMetric(float64(len(docs)), "passages")
}
