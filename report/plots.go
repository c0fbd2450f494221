package report

import (
	"fmt"
	"html"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/llm"
)

// The plots are SVG written here, by hand: the same file is linked from
// report.md and inlined in report.html, needs no JavaScript to render, and
// every data point is an element carrying its values (data-* attributes
// and a <title> tooltip) that the page's script and tests can read.

// Plot is one figure.
type Plot struct {
	ID    string // element id and file name (plots/ID.svg)
	Title string
	SVG   string
	// Points is how many data points the SVG holds (class "point").
	Points int
}

// palette is colour-blind safe (Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

func color(i int) string { return palette[i%len(palette)] }

const (
	plotW, plotH                         = 640.0, 400.0
	padLeft, padRight, padTop, padBottom = 70.0, 150.0, 30.0, 50.0
)

// frame maps data coordinates to the plot area.
type frame struct{ x0, x1, y0, y1 float64 }

func (f frame) X(v float64) float64 {
	return padLeft + (v-f.x0)/(f.x1-f.x0)*(plotW-padLeft-padRight)
}

func (f frame) Y(v float64) float64 {
	return plotH - padBottom - (v-f.y0)/(f.y1-f.y0)*(plotH-padTop-padBottom)
}

// ticks returns about n round tick values covering [lo, hi] and the
// widened range.
func ticks(lo, hi float64, n int) ([]float64, float64, float64) {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	var ts []float64
	for v := lo; v <= hi+step/2; v += step {
		ts = append(ts, v)
	}
	return ts, lo, hi
}

// Labels are placed where they cannot overlap: a text's box is estimated
// from its length at the plots' 12 px font (charW a wide glyph's advance),
// and a label that fits nowhere is left out, its point named by the
// legend's colour and its tooltip.
const charW, textH = 7.5, 14.0

// box is a text's extent in SVG coordinates.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }

// textBox is the box of s drawn at (x, baseline y) with anchor start,
// middle or end.
func textBox(x, y float64, s, anchor string) box {
	w := charW * float64(len([]rune(s)))
	switch anchor {
	case "middle":
		x -= w / 2
	case "end":
		x -= w
	}
	return box{x, y - textH + 3, x + w, y + 3}
}

// abbreviate shortens s to at most width pixels, ending it with "…".
func abbreviate(s string, width float64) string {
	r := []rune(s)
	n := int(width / charW)
	if len(r) <= n || n < 2 {
		return s
	}
	return string(r[:n-1]) + "…"
}

func svgOpen(b *strings.Builder, id, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" id="%s" class="plot" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s" font-family="sans-serif" font-size="12">`+"\n",
		id, plotW, plotH, plotW, plotH, html.EscapeString(title))
	fmt.Fprintf(b, `<rect width="%.0f" height="%.0f" fill="#fff"/>`+"\n", plotW, plotH)
	fmt.Fprintf(b, `<text x="%.0f" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", padLeft, html.EscapeString(title))
}

// axes draws the frame, grid lines, tick labels and axis titles.
func axes(b *strings.Builder, f frame, xt, yt []float64, xlabel, ylabel string, xfmt, yfmt func(float64) string) {
	x0, x1, y0, y1 := f.X(f.x0), f.X(f.x1), f.Y(f.y0), f.Y(f.y1)
	b.WriteString(`<g class="axes" stroke="#ccc">` + "\n")
	for _, v := range yt {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`+"\n", x0, x1, f.Y(v), f.Y(v))
	}
	for _, v := range xt {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`+"\n", f.X(v), f.X(v), y0, y1)
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#666"/>`+"\n", x0, y1, x1-x0, y0-y1)
	b.WriteString("</g>\n<g class=\"labels\" fill=\"#333\">\n")
	for _, v := range yt {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-8, f.Y(v)+4, yfmt(v))
	}
	for _, v := range xt {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", f.X(v), y0+19, xfmt(v))
	}
	if xlabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, html.EscapeString(xlabel))
	}
	fmt.Fprintf(b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, html.EscapeString(ylabel))
	b.WriteString("</g>\n")
}

// legend lists the candidates at the right, abbreviated to its width and
// spaced to fit above the plot's bottom; each entry toggles its series in
// the HTML report.
func legend(b *strings.Builder, names []string) {
	step := min(20, (plotH-padBottom-padTop-60)/float64(max(len(names), 1)))
	for i, n := range names {
		y := padTop + 10 + float64(i)*step
		fmt.Fprintf(b, `<g class="legend" data-candidate="%s"><rect x="%.0f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.1f">%s<title>%s</title></text></g>`+"\n",
			html.EscapeString(n), plotW-padRight+16, y-10, color(i), plotW-padRight+34, y, html.EscapeString(abbreviate(n, padRight-40)), html.EscapeString(n))
	}
}

func names(res *eval.Result) []string {
	out := make([]string, len(res.Summary.Candidates))
	for i, a := range res.Summary.Candidates {
		out[i] = a.Name
	}
	return out
}

// SuccessVsPeak plots success against mean peak tokens, both with their
// 95% intervals as whiskers, and the Pareto front.
func SuccessVsPeak(res *eval.Result) Plot {
	arms := res.Summary.Candidates
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, a := range arms {
		p := a.Metrics[eval.MetricPeakTokens]
		xlo, xhi = math.Min(xlo, p.Low), math.Max(xhi, p.High)
	}
	xt, x0, x1 := ticks(xlo*0.95, xhi*1.05, 6)
	yt, _, _ := ticks(0, 1, 5)
	// A margin below 0% and above 100% leaves room for the labels of
	// points on those edges.
	f := frame{x0, x1, -0.12, 1.06}
	var b strings.Builder
	const id, title = "success-vs-peak", "Success vs peak tokens (95% intervals; line: Pareto front)"
	svgOpen(&b, id, title)
	axes(&b, f, xt, yt, "peak tokens per task (mean)", "success rate", Human, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	// The front: its points sorted by cost, joined as a step line.
	var front []eval.Arm
	for _, a := range arms {
		if a.ParetoPeak {
			front = append(front, a)
		}
	}
	sort.Slice(front, func(i, j int) bool {
		return front[i].Metrics[eval.MetricPeakTokens].Point < front[j].Metrics[eval.MetricPeakTokens].Point
	})
	var path strings.Builder
	for i, a := range front {
		x, y := f.X(a.Metrics[eval.MetricPeakTokens].Point), f.Y(a.Metrics[eval.MetricSuccess].Point)
		if i == 0 {
			fmt.Fprintf(&path, "M%.1f %.1f", x, y)
		} else {
			fmt.Fprintf(&path, " H%.1f V%.1f", x, y)
		}
	}
	if path.Len() > 0 {
		fmt.Fprintf(&b, `<path class="pareto" d="%s" fill="none" stroke="#999" stroke-dasharray="4 3" stroke-width="1.5"/>`+"\n", path.String())
	}
	// The markers are obstacles too: a label never covers another point.
	var placed []box
	for _, a := range arms {
		x, y := f.X(a.Metrics[eval.MetricPeakTokens].Point), f.Y(a.Metrics[eval.MetricSuccess].Point)
		placed = append(placed, box{x - 6, y - 6, x + 6, y + 6})
	}
	for i, a := range arms {
		s, p := a.Metrics[eval.MetricSuccess], a.Metrics[eval.MetricPeakTokens]
		x, y := f.X(p.Point), f.Y(s.Point)
		c := color(i)
		fmt.Fprintf(&b, `<g class="point series" data-candidate="%s" data-success="%.4f" data-success-low="%.4f" data-success-high="%.4f" data-peak="%.1f" data-peak-low="%.1f" data-peak-high="%.1f" data-pareto="%t">`,
			html.EscapeString(a.Name), s.Point, s.Low, s.High, p.Point, p.Low, p.High, a.ParetoPeak)
		fmt.Fprintf(&b, `<title>%s: success %.1f%% [%.1f, %.1f], peak tokens %.0f [%.0f, %.0f]%s</title>`,
			html.EscapeString(a.Name), 100*s.Point, 100*s.Low, 100*s.High, p.Point, p.Low, p.High, map[bool]string{true: ", on the Pareto front"}[a.ParetoPeak])
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, f.X(p.Low), f.X(p.High), y, y, c)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, x, x, f.Y(s.Low), f.Y(s.High), c)
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="6" fill="%s" stroke="#fff"/>`, x, y, c)
		if lx, ly, anchor, ok := place(&placed, x, y, a.Name, f); ok {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`, lx, ly, c, anchor, html.EscapeString(a.Name))
		}
		b.WriteString("</g>\n")
	}
	legend(&b, names(res))
	b.WriteString("</svg>\n")
	return Plot{ID: id, Title: title, SVG: b.String(), Points: len(arms)}
}

// labelSpots are where a point's label may go, tried in order: beside,
// above or below the point, then farther off.
var labelSpots = []struct {
	dx, dy float64
	anchor string
}{
	{8, -8, "start"}, {8, 16, "start"}, {-8, -8, "end"}, {-8, 16, "end"},
	{0, -12, "middle"}, {0, 24, "middle"}, {8, -24, "start"}, {-8, -24, "end"}, {8, 32, "start"}, {-8, 32, "end"},
	{0, 36, "middle"}, {0, -28, "middle"}, {12, 40, "start"}, {-12, 40, "end"},
}

// place finds a spot for a point's label inside the plot area that
// overlaps no label placed before, and records it.
func place(placed *[]box, x, y float64, label string, f frame) (lx, ly float64, anchor string, ok bool) {
	area := box{f.X(f.x0), f.Y(f.y1), f.X(f.x1), f.Y(f.y0)}
	for _, s := range labelSpots {
		bx := textBox(x+s.dx, y+s.dy, label, s.anchor)
		if bx.x0 < area.x0 || bx.x1 > area.x1 || bx.y0 < area.y0 || bx.y1 > area.y1 {
			continue
		}
		if slices.ContainsFunc(*placed, bx.overlaps) {
			continue
		}
		*placed = append(*placed, bx)
		return x + s.dx, y + s.dy, s.anchor, true
	}
	return 0, 0, "", false
}

// stepStats returns, per agent call index, the mean context over the runs
// that reached it and a band of ±1 standard deviation.
func stepStats(res *eval.Result, cand string) (mean, lo, hi []float64) {
	var cols [][]float64
	for _, o := range res.Outcomes {
		if o.Candidate != cand {
			continue
		}
		for i, c := range o.Context {
			if i >= len(cols) {
				cols = append(cols, nil)
			}
			cols[i] = append(cols[i], float64(c))
		}
	}
	for _, xs := range cols {
		m, sd := eval.Mean(xs), eval.SD(xs)
		mean, lo, hi = append(mean, m), append(lo, math.Max(0, m-sd)), append(hi, m+sd)
	}
	return mean, lo, hi
}

// ContextPerStep plots the agent's context size at each step, mean and
// ±1 sd band per candidate: the growth figure of ACON and PACE.
func ContextPerStep(res *eval.Result) Plot {
	arms := res.Summary.Candidates
	type series struct{ mean, lo, hi []float64 }
	all := make([]series, len(arms))
	steps, top := 1, 1.0
	for i, a := range arms {
		m, lo, hi := stepStats(res, a.Name)
		all[i] = series{m, lo, hi}
		steps = max(steps, len(m))
		for _, v := range hi {
			top = math.Max(top, v)
		}
	}
	xt, x0, x1 := ticks(1, float64(steps), 6)
	yt, y0, y1 := ticks(0, top, 5)
	f := frame{x0, x1, y0, y1}
	var b strings.Builder
	const id, title = "context-per-step", "Agent context per step (mean, band ±1 sd)"
	svgOpen(&b, id, title)
	axes(&b, f, xt, yt, "agent call (step)", "agent context tokens (system prompt excluded)", Human, Human)
	points := 0
	for i, a := range arms {
		s, c := all[i], color(i)
		if len(s.mean) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<g class="series" data-candidate="%s">`+"\n", html.EscapeString(a.Name))
		var band, line strings.Builder
		for j := range s.hi {
			fmt.Fprintf(&band, "%.1f,%.1f ", f.X(float64(j+1)), f.Y(s.hi[j]))
		}
		for j := len(s.lo) - 1; j >= 0; j-- {
			fmt.Fprintf(&band, "%.1f,%.1f ", f.X(float64(j+1)), f.Y(s.lo[j]))
		}
		for j, v := range s.mean {
			fmt.Fprintf(&line, "%.1f,%.1f ", f.X(float64(j+1)), f.Y(v))
		}
		fmt.Fprintf(&b, `<polygon class="band" points="%s" fill="%s" fill-opacity="0.15" stroke="none"/>`+"\n", strings.TrimSpace(band.String()), c)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(line.String()), c)
		for j, v := range s.mean {
			fmt.Fprintf(&b, `<circle class="point" data-candidate="%s" data-step="%d" data-mean="%.1f" data-low="%.1f" data-high="%.1f" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s, step %d: %.0f tokens (band %.0f–%.0f)</title></circle>`+"\n",
				html.EscapeString(a.Name), j+1, v, s.lo[j], s.hi[j], f.X(float64(j+1)), f.Y(v), c, html.EscapeString(a.Name), j+1, v, s.lo[j], s.hi[j])
			points++
		}
		b.WriteString("</g>\n")
	}
	legend(&b, names(res))
	b.WriteString("</svg>\n")
	return Plot{ID: id, Title: title, SVG: b.String(), Points: points}
}

// TokenCosts plots each candidate's mean agent and compressor tokens per
// task as stacked bars.
func TokenCosts(res *eval.Result) Plot {
	arms := res.Summary.Candidates
	top := 1.0
	for _, a := range arms {
		top = math.Max(top, a.Metrics[eval.MetricAgentTokens].Point+a.Metrics[eval.MetricCompressorTokens].Point)
	}
	yt, y0, y1 := ticks(0, top, 5)
	f := frame{0, float64(len(arms)), y0, y1}
	var b strings.Builder
	const id, title = "token-costs", "Agent vs compressor tokens per task (mean)"
	svgOpen(&b, id, title)
	axes(&b, f, nil, yt, "", "tokens per task", Human, Human)
	slot := f.X(1) - f.X(0)
	// Names wider than a slot alternate between two rows, each as wide as
	// two slots, and are abbreviated beyond that.
	rows, width := 1, slot-4
	for _, a := range arms {
		if charW*float64(len([]rune(a.Name))) > width {
			rows, width = 2, 2*slot-4
		}
	}
	points := 0
	for i, a := range arms {
		ag, co := a.Metrics[eval.MetricAgentTokens].Point, a.Metrics[eval.MetricCompressorTokens].Point
		x := f.X(float64(i)) + slot*0.2
		w := slot * 0.6
		fmt.Fprintf(&b, `<g class="series" data-candidate="%s">`, html.EscapeString(a.Name))
		for _, part := range []struct {
			role     string
			lo, v    float64
			fill     string
			fillOpac float64
		}{{llm.RoleAgent, 0, ag, color(i), 1}, {llm.RoleCompressor, ag, co, color(i), 0.45}} {
			fmt.Fprintf(&b, `<rect class="point" data-candidate="%s" data-role="%s" data-tokens="%.1f" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f" stroke="%s"><title>%s: %s %.0f tokens per task</title></rect>`,
				html.EscapeString(a.Name), part.role, part.v, x, f.Y(part.lo+part.v), w, f.Y(part.lo)-f.Y(part.lo+part.v), part.fill, part.fillOpac, part.fill,
				html.EscapeString(a.Name), part.role, part.v)
			points++
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s<title>%s</title></text></g>`+"\n",
			x+w/2, plotH-padBottom+16+float64(i%rows)*textH, html.EscapeString(abbreviate(a.Name, width)), html.EscapeString(a.Name))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#333">solid: agent</text><text x="%.0f" y="%.0f" fill="#333">light: compressor</text>`+"\n",
		plotW-padRight+16, plotH-padBottom-30, plotW-padRight+16, plotH-padBottom-12)
	legend(&b, names(res))
	b.WriteString("</svg>\n")
	return Plot{ID: id, Title: title, SVG: b.String(), Points: points}
}

// Plots returns every figure of an evaluation.
func Plots(res *eval.Result) []Plot {
	return []Plot{SuccessVsPeak(res), ContextPerStep(res), TokenCosts(res)}
}
