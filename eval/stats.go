package eval

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/ctxopt/ctxopt/internal/memo"
)

// Interval is a point estimate with a 95% interval.
type Interval struct {
	Point float64 `json:"point"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Resamples is the number of bootstrap resamples behind every interval.
const Resamples = 10000

// Bootstrap resamples units (tasks) with replacement, seeded, so the same
// inputs always give the same interval.
type Bootstrap struct {
	Resamples int
	Seed      uint64
}

// quantiles returns the 2.5% and 97.5% percentiles of resample
// statistics: the smallest values whose empirical CDF reaches 0.025 and
// 0.975 (the inverse-CDF definition, so small-n cases can be checked
// against the exact bootstrap distribution). It reorders stats: the two
// order statistics are selected, not sorted for (the sort took most of
// an evaluation's statistics).
func quantiles(stats []float64) (lo, hi float64) {
	b := len(stats)
	at := func(q float64) int {
		return min(max(int(math.Ceil(q*float64(b)))-1, 0), b-1)
	}
	ilo, ihi := at(0.025), at(0.975)
	selectNth(stats, ihi)
	hi = stats[ihi]
	// What sorts before ihi is at its left, ilo's value among it.
	if ilo < ihi {
		selectNth(stats[:ihi], ilo)
	}
	return stats[ilo], hi
}

// floatLess is sort.Float64s' order: NaN before every number.
func floatLess(a, b float64) bool { return a < b || (math.IsNaN(a) && !math.IsNaN(b)) }

// selectNth puts at xs[k] the value sort.Float64s would, every value
// before it ordered no later and every value after it no earlier
// (quickselect; three-way partitions keep the many equal statistics of a
// small sample linear).
func selectNth(xs []float64, k int) {
	lo, hi := 0, len(xs)
	for hi-lo > 1 {
		a, b, c := xs[lo], xs[lo+(hi-lo)/2], xs[hi-1]
		if floatLess(b, a) {
			a, b = b, a
		}
		if floatLess(c, b) {
			b = c
			if floatLess(b, a) {
				b = a
			}
		}
		p := b // the median of three
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch x := xs[i]; {
			case floatLess(x, p):
				xs[lt], xs[i] = xs[i], xs[lt]
				lt++
				i++
			case floatLess(p, x):
				gt--
				xs[i], xs[gt] = xs[gt], xs[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return
		}
	}
}

// draws returns the generator of the tasks a bootstrap resamples: stream
// tells Mean's draws from Paired's.
func (bs Bootstrap) draws(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(bs.Seed, stream))
}

// Mean returns the 95% percentile bootstrap interval of the mean of xs.
func (bs Bootstrap) Mean(xs []float64) Interval {
	return bs.Means([][]float64{xs})[0]
}

// Means is Mean of each of xss, which are aligned by task (of one length):
// the tasks drawn for a resample serve every one of them, so each interval
// is the one Mean gives alone, for one draw instead of one per metric.
func (bs Bootstrap) Means(xss [][]float64) []Interval {
	out := make([]Interval, len(xss))
	for m, xs := range xss {
		out[m] = Interval{Point: Mean(xs)}
	}
	if len(xss) == 0 || len(xss[0]) == 0 {
		return out
	}
	n := len(xss[0])
	rng := bs.draws(0xb007)
	idx := make([]int, n)
	stats := make([][]float64, len(xss))
	for m := range stats {
		stats[m] = make([]float64, bs.Resamples)
	}
	for r := range bs.Resamples {
		for k := range idx {
			idx[k] = rng.IntN(n)
		}
		for m, xs := range xss {
			var s float64
			for _, i := range idx {
				s += xs[i]
			}
			stats[m][r] = s / float64(n)
		}
	}
	for m := range out {
		out[m].Low, out[m].High = quantiles(stats[m])
	}
	return out
}

// Paired is the paired comparison of one metric: the difference of means
// (candidate − reference) and their ratio (candidate / reference), each
// with a 95% paired bootstrap interval. Ratio is nil when the reference's
// mean is zero.
type Paired struct {
	Diff  Interval  `json:"diff"`
	Ratio *Interval `json:"ratio,omitempty"`
}

// Paired resamples tasks (the same indexes for a and b, which are aligned
// by task) and returns the intervals of the difference and the ratio of
// the means.
func (bs Bootstrap) Paired(a, b []float64) Paired {
	return bs.PairedAll([][]float64{a}, [][]float64{b})[0]
}

// PairedAll is Paired of each pair (as[m], bs[m]), all aligned by the
// same tasks (of one length): the tasks drawn for a resample serve every
// pair, so each comparison is the one Paired gives alone, for one draw
// instead of one per metric.
func (bs Bootstrap) PairedAll(as, refs [][]float64) []Paired {
	key := bs.pairedKey(as, refs)
	done, ok := pairedDone.Get(key)
	if !ok {
		done = bs.pairedAll(as, refs)
		pairedDone.Put(key, done)
	}
	out := make([]Paired, len(done))
	for m, p := range done {
		out[m] = p
		if p.Ratio != nil {
			r := *p.Ratio
			out[m].Ratio = &r
		}
	}
	return out
}

// pairedDone holds the comparisons computed so far, by their inputs: a
// report compares a candidate with the same arm several times (its
// verdict, the gate, the table), and each comparison is Resamples draws
// for every metric. The comparison is a function of its inputs alone.
var pairedDone = memo.New[[sha256.Size]byte, []Paired](256)

// pairedKey names the inputs of a PairedAll: the resamples, the seed and
// every value, bit for bit.
func (bs Bootstrap) pairedKey(as, refs [][]float64) [sha256.Size]byte {
	h := sha256.New()
	b := binary.LittleEndian.AppendUint64(nil, uint64(bs.Resamples))
	b = binary.LittleEndian.AppendUint64(b, bs.Seed)
	for _, xss := range [][][]float64{as, refs} {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(xss)))
		for _, xs := range xss {
			b = binary.LittleEndian.AppendUint64(b, uint64(len(xs)))
			for _, x := range xs {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			}
		}
	}
	h.Write(b)
	return [sha256.Size]byte(h.Sum(nil))
}

// pairedAll is PairedAll without the memo.
func (bs Bootstrap) pairedAll(as, refs [][]float64) []Paired {
	out := make([]Paired, len(as))
	for m := range as {
		ma, mb := Mean(as[m]), Mean(refs[m])
		out[m] = Paired{Diff: Interval{Point: ma - mb, Low: ma - mb, High: ma - mb}}
		if mb != 0 {
			r := Sum(as[m]) / Sum(refs[m])
			out[m].Ratio = &Interval{Point: r, Low: r, High: r}
		}
	}
	if len(as) == 0 || len(as[0]) == 0 {
		return out
	}
	n := len(as[0])
	rng := bs.draws(0x9a1d)
	idx := make([]int, n)
	diffs := make([][]float64, len(as))
	ratios := make([][]float64, len(as))
	for m := range as {
		diffs[m] = make([]float64, 0, bs.Resamples)
		ratios[m] = make([]float64, 0, bs.Resamples)
	}
	for range bs.Resamples {
		for k := range idx {
			idx[k] = rng.IntN(n)
		}
		for m, a := range as {
			b := refs[m]
			var sa, sb float64
			for _, i := range idx {
				sa += a[i]
				sb += b[i]
			}
			diffs[m] = append(diffs[m], (sa-sb)/float64(n))
			if sb != 0 {
				ratios[m] = append(ratios[m], sa/sb)
			}
		}
	}
	for m := range out {
		out[m].Diff.Low, out[m].Diff.High = quantiles(diffs[m])
		if p := out[m].Ratio; p != nil {
			// A resample whose reference sums to zero has no finite ratio:
			// it counts as +Inf, which can only widen the interval.
			for len(ratios[m]) < bs.Resamples {
				ratios[m] = append(ratios[m], math.Inf(1))
			}
			p.Low, p.High = quantiles(ratios[m])
		}
	}
	return out
}

// McNemar is the exact McNemar test on paired binary outcomes: B counts
// pairs only the candidate solved, C pairs only the reference solved.
type McNemar struct {
	B int     `json:"candidate_only"`
	C int     `json:"reference_only"`
	P float64 `json:"p"`
	// PHolm is P adjusted with Holm's method over the comparisons of one
	// evaluation.
	PHolm float64 `json:"p_holm"`
}

// McNemarExact returns the two-sided exact p-value of McNemar's test:
// under H0 the discordant pairs split Binomial(b+c, 1/2), and the p-value
// is twice the smaller tail, capped at 1. Exact rational arithmetic keeps
// it right for large counts.
func McNemarExact(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	tail := new(big.Int)
	for i := 0; i <= k; i++ {
		tail.Add(tail, new(big.Int).Binomial(int64(n), int64(i)))
	}
	r := new(big.Rat).SetFrac(tail.Lsh(tail, 1), new(big.Int).Lsh(big.NewInt(1), uint(n)))
	p, _ := r.Float64()
	return math.Min(1, p)
}

// Holm returns Holm's step-down adjusted p-values, in the input order:
// sorted ascending, p_(i) is multiplied by m−i+1 (i from 1), made
// monotone with a running maximum and capped at 1.
func Holm(ps []float64) []float64 {
	m := len(ps)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]float64, m)
	run := 0.0
	for rank, i := range idx {
		adj := math.Min(1, float64(m-rank)*ps[i])
		run = math.Max(run, adj)
		out[i] = run
	}
	return out
}

// Pareto marks the points not dominated by another: a point is dominated
// when another has success at least as high and cost at most as high, one
// of them strictly.
func Pareto(success, cost []float64) []bool {
	on := make([]bool, len(success))
	for i := range success {
		on[i] = !slices.ContainsFunc(indexes(len(success)), func(j int) bool {
			return j != i && success[j] >= success[i] && cost[j] <= cost[i] &&
				(success[j] > success[i] || cost[j] < cost[i])
		})
	}
	return on
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Sum returns the sum of xs.
func Sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// Mean returns the mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return Sum(xs) / float64(len(xs))
}

// SD returns the sample standard deviation of xs, 0 for fewer than two.
func SD(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m, ss := Mean(xs), 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// jsonFloat encodes ±Inf (a ratio interval can be unbounded) as a string,
// which JSON numbers cannot hold.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	switch v := float64(f); {
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	}
	return json.Marshal(float64(f))
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "+Inf":
			*f = jsonFloat(math.Inf(1))
		case "-Inf":
			*f = jsonFloat(math.Inf(-1))
		case "NaN":
			*f = jsonFloat(math.NaN())
		default:
			return fmt.Errorf("interval bound %q is not a number", s)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

type intervalJSON struct {
	Point jsonFloat `json:"point"`
	Low   jsonFloat `json:"low"`
	High  jsonFloat `json:"high"`
}

// MarshalJSON writes unbounded ends as "+Inf" or "-Inf".
func (iv Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(intervalJSON{jsonFloat(iv.Point), jsonFloat(iv.Low), jsonFloat(iv.High)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var j intervalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*iv = Interval{float64(j.Point), float64(j.Low), float64(j.High)}
	return nil
}
