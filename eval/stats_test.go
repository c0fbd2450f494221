package eval

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// The expected values below were computed independently of this package
// by testdata/stats_reference.py (Python standard library only: exact
// binomial sums with math.comb and fractions, Holm by its definition, and
// the exact bootstrap distribution by enumerating all n^n resamples).
// Bootstrap cases were kept only where the exact CDF passes 2.5% and 97.5%
// at least 0.0039 away from a jump, five standard errors of a 40000-draw
// Monte Carlo quantile, so the seeded estimate must land on the exact value.

func TestMcNemarExact(t *testing.T) {
	for _, c := range []struct {
		b, c int
		want float64
	}{
		{10, 2, 0.03857421875},
		{0, 5, 0.0625},
		{25, 12, 0.04703102743951604},
		{3, 3, 1},
		{1, 0, 1},
		{60, 40, 0.05688793364098079},
		{0, 0, 1},
	} {
		if got := McNemarExact(c.b, c.c); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("McNemarExact(%d, %d) = %.17g, want %.17g", c.b, c.c, got, c.want)
		}
	}
}

func TestHolm(t *testing.T) {
	for _, c := range []struct{ in, want []float64 }{
		{[]float64{0.01, 0.04, 0.03, 0.005}, []float64{0.03, 0.06, 0.06, 0.02}},
		{[]float64{0.2, 0.001, 0.5}, []float64{0.4, 0.003, 0.5}},
		{nil, []float64{}},
	} {
		got := Holm(c.in)
		if len(got) != len(c.want) {
			t.Fatalf("Holm(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("Holm(%v) = %v, want %v", c.in, got, c.want)
				break
			}
		}
	}
}

func TestBootstrapMeanExact(t *testing.T) {
	bs := Bootstrap{Resamples: 40000, Seed: 7}
	for _, c := range []struct {
		xs               []float64
		point, low, high float64
	}{
		{[]float64{0, 1, 1, 3}, 1.25, 0.25, 2.5},
	} {
		got := bs.Mean(c.xs)
		if got.Point != c.point || got.Low != c.low || got.High != c.high {
			t.Errorf("Mean(%v) = %+v, want point %g [%g, %g]", c.xs, got, c.point, c.low, c.high)
		}
	}
	// [2 4 4 5 9]: the exact 2.5% quantile is 3.0 (its 97.5% one sits too
	// close to a jump of the CDF to be checked this way).
	if got := bs.Mean([]float64{2, 4, 4, 5, 9}); got.Low != 3 || got.Point != 4.8 {
		t.Errorf("Mean([2 4 4 5 9]) = %+v, want point 4.8, low 3", got)
	}
}

func TestBootstrapPairedExact(t *testing.T) {
	bs := Bootstrap{Resamples: 40000, Seed: 11}
	t.Run("binary", func(t *testing.T) {
		p := bs.Paired([]float64{1, 1, 0, 1, 0}, []float64{0, 1, 0, 0, 0})
		if math.Abs(p.Diff.Point-0.4) > 1e-12 || p.Diff.Low != 0 || math.Abs(p.Diff.High-0.8) > 1e-12 {
			t.Errorf("diff = %+v, want 0.4 [0, 0.8]", p.Diff)
		}
		if p.Ratio == nil || p.Ratio.Point != 3 || p.Ratio.Low != 1 || !math.IsInf(p.Ratio.High, 1) {
			t.Errorf("ratio = %+v, want 3 [1, +Inf]", p.Ratio)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		p := bs.Paired([]float64{300, 420, 380, 510, 260}, []float64{500, 610, 450, 700, 480})
		if p.Diff.Point != -174 || p.Diff.Low != -208 || p.Diff.High != -120 {
			t.Errorf("diff = %+v, want -174 [-208, -120]", p.Diff)
		}
		if want := 0.5992217898832685; p.Ratio == nil || math.Abs(p.Ratio.Low-want) > 1e-12 {
			t.Errorf("ratio = %+v, want low %.16g", p.Ratio, want)
		}
	})
	t.Run("zero reference has no ratio", func(t *testing.T) {
		if p := bs.Paired([]float64{3, 4}, []float64{0, 0}); p.Ratio != nil || p.Diff.Low != 3 || p.Diff.High != 4 {
			t.Errorf("got %+v (ratio %v), want diff [3, 4] and no ratio", p.Diff, p.Ratio)
		}
	})
}

func TestPareto(t *testing.T) {
	// success, cost; by hand: B dominates D (higher success, lower cost),
	// A and C trade success for cost, E ties C exactly (neither dominates).
	success := []float64{0.5, 0.8, 0.9, 0.7, 0.9}
	cost := []float64{100, 200, 400, 250, 400}
	want := []bool{true, true, true, false, true}
	got := Pareto(success, cost)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Pareto = %v, want %v", got, want)
			break
		}
	}
}

func TestIntervalJSON(t *testing.T) {
	in := Interval{Point: 3, Low: 1, High: math.Inf(1)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"point":3,"low":1,"high":"+Inf"}` {
		t.Errorf("encoded %s", b)
	}
	var out Interval
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("decoded %+v, %v; want %+v", out, err, in)
	}
}

// sortedQuantiles is quantiles as it was computed before selection
// replaced the sort: the oracle of TestBatchedBootstrapIsPerMetric.
func sortedQuantiles(stats []float64) (lo, hi float64) {
	s := slices.Clone(stats)
	sort.Float64s(s)
	at := func(q float64) float64 { return s[min(max(int(math.Ceil(q*float64(len(s))))-1, 0), len(s)-1)] }
	return at(0.025), at(0.975)
}

// Means and PairedAll give, bit for bit, what one bootstrap per metric
// with its statistics sorted gives: the same tasks drawn for every metric
// in the same order, the same order statistics selected.
func TestBatchedBootstrapIsPerMetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 5, 12, 40} {
		// Binary, small integers (many ties), continuous, zero and
		// sometimes-zero references (infinite ratios), and a NaN.
		gens := []func(i int) float64{
			func(int) float64 { return float64(rng.IntN(2)) },
			func(int) float64 { return float64(rng.IntN(4)) },
			func(int) float64 { return rng.Float64() * 1000 },
			func(int) float64 { return 0 },
			func(i int) float64 { return float64(i % 2 * rng.IntN(3)) },
			func(i int) float64 {
				if i == n/2 {
					return math.NaN()
				}
				return rng.Float64()
			},
		}
		var as, refs [][]float64
		for _, ga := range gens {
			for _, gb := range gens {
				a, b := make([]float64, n), make([]float64, n)
				for i := range n {
					a[i], b[i] = ga(i), gb(i)
				}
				as, refs = append(as, a), append(refs, b)
			}
		}
		bs := Bootstrap{Resamples: 2001, Seed: uint64(n)}
		same := func(x, y float64) bool {
			return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
		}
		for m, got := range bs.PairedAll(as, refs) {
			want := pairedOneByOne(bs, as[m], refs[m])
			if !same(got.Diff.Low, want.Diff.Low) || !same(got.Diff.High, want.Diff.High) || !same(got.Diff.Point, want.Diff.Point) ||
				(got.Ratio == nil) != (want.Ratio == nil) || got.Ratio != nil && (!same(got.Ratio.Low, want.Ratio.Low) || !same(got.Ratio.High, want.Ratio.High)) {
				t.Errorf("n %d, pair %d: batched %+v %v, one by one %+v %v", n, m, got.Diff, got.Ratio, want.Diff, want.Ratio)
			}
		}
		// Asked again, the same comparisons, from the memo, not aliased.
		first, again := bs.PairedAll(as, refs), bs.PairedAll(as, refs)
		for m := range first {
			if !reflect.DeepEqual(first[m], again[m]) && !math.IsNaN(first[m].Diff.Point) || first[m].Ratio != nil && first[m].Ratio == again[m].Ratio {
				t.Errorf("n %d, pair %d: asked again %+v %v, first %+v %v", n, m, again[m].Diff, again[m].Ratio, first[m].Diff, first[m].Ratio)
			}
		}
		for m, got := range bs.Means(as) {
			want := meanOneByOne(bs, as[m])
			if !same(got.Low, want.Low) || !same(got.High, want.High) || !same(got.Point, want.Point) {
				t.Errorf("n %d, metric %d: batched mean %+v, one by one %+v", n, m, got, want)
			}
		}
	}
}

// pairedOneByOne and meanOneByOne are Paired and Mean as they were before
// the metrics of a comparison shared their draws.
func pairedOneByOne(bs Bootstrap, a, b []float64) Paired {
	n := len(a)
	ma, mb := Mean(a), Mean(b)
	p := Paired{Diff: Interval{Point: ma - mb, Low: ma - mb, High: ma - mb}}
	if mb != 0 {
		r := Sum(a) / Sum(b)
		p.Ratio = &Interval{Point: r, Low: r, High: r}
	}
	rng := rand.New(rand.NewPCG(bs.Seed, 0x9a1d))
	var diffs, ratios []float64
	for range bs.Resamples {
		var sa, sb float64
		for range n {
			i := rng.IntN(n)
			sa += a[i]
			sb += b[i]
		}
		diffs = append(diffs, (sa-sb)/float64(n))
		if sb != 0 {
			ratios = append(ratios, sa/sb)
		}
	}
	p.Diff.Low, p.Diff.High = sortedQuantiles(diffs)
	if p.Ratio != nil {
		for len(ratios) < bs.Resamples {
			ratios = append(ratios, math.Inf(1))
		}
		p.Ratio.Low, p.Ratio.High = sortedQuantiles(ratios)
	}
	return p
}

func meanOneByOne(bs Bootstrap, xs []float64) Interval {
	n := len(xs)
	iv := Interval{Point: Mean(xs)}
	rng := rand.New(rand.NewPCG(bs.Seed, 0xb007))
	stats := make([]float64, bs.Resamples)
	for r := range stats {
		var s float64
		for range n {
			s += xs[rng.IntN(n)]
		}
		stats[r] = s / float64(n)
	}
	iv.Low, iv.High = sortedQuantiles(stats)
	return iv
}
