package report

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"
	"strings"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// The page inlines its style, its script (a few lines of vanilla JS:
// tooltips, legend toggles, sortable tables, the per-task picker) and the
// same SVG plots report.md links; it requests nothing.
var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{{.Title}}</title>
<style>
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
.notice{background:#fff4d6;border:1px solid #e0c060;padding:.6em 1em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em;max-width:100%}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right;vertical-align:top;overflow-wrap:break-word}table.wide td{overflow-wrap:anywhere}
th{background:#f3f3f3;cursor:pointer;user-select:none}td:first-child,th:first-child{text-align:left}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{border:1px solid #ddd;max-width:100%;height:auto}
.legend{cursor:pointer}.off{opacity:.12}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:.3em .5em;border-radius:3px;font-size:.8em;display:none;max-width:30em}
.pair{display:none}.pair.shown{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.pair pre{white-space:pre-wrap;background:#f8f8f8;border:1px solid #ddd;padding:.5em;font-size:.8em;max-height:30em;overflow:auto}
pre.guideline,pre.diff{white-space:pre-wrap;overflow-wrap:anywhere;background:#f8f8f8;border:1px solid #ddd;padding:.5em;font-size:.8em}
.diff .add{color:#087a3a}.diff .del{color:#b00020}.diff .hunk{color:#666}
.verdict{border:2px solid #b00020;padding:0 1em;margin-top:1em}.verdict.promote{border-color:#087a3a}
.verdict h2{margin-top:.6em}.rules{font-size:.9em}
.ok{color:#087a3a}.fail{color:#b00020}.dropped li{color:#b00020;font-size:.8em}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Notice}}<p class="notice">{{.Notice}}</p>{{end}}
{{with .Verdict}}<section id="verdict" class="verdict{{if .Promote}} promote{{end}}">
<h2>{{.Heading}}</h2>
{{range .Lines}}<p>{{.}}</p>{{end}}
{{template "table" .Table}}
<p id="decision">{{.Gate}}</p>
{{if .Rules}}<ul class="rules">{{range .Rules}}<li>{{.}}</li>{{end}}</ul>{{end}}
</section>{{end}}
{{with .NoVerdict}}<section id="verdict"><h2>Verdict</h2><p id="decision">{{.}}</p></section>{{end}}
{{range .Guidelines}}<h2>{{.Heading}}</h2>
<pre class="guideline">{{.Text}}</pre>
<p>{{.DiffTitle}}</p>
{{if .Diff}}<pre class="diff">{{range .Diff}}<span class="{{.Class}}">{{.Text}}</span>
{{end}}</pre>{{end}}{{end}}
{{with .Eval}}{{if $.Verdict}}<h2>Details</h2>{{end}}
<p>{{.Intro}}</p>
<h2>Plots</h2>
<p>Hover a point for its values; click a legend entry to hide or show a candidate.</p>
<div class="plots">{{range .Plots}}{{.}}{{end}}</div>
<h2>Candidates</h2>
{{template "table" .Candidates}}
{{if .Comparisons.Rows}}<h2>Against {{.Reference}}</h2>
{{template "table" .Comparisons}}
<p>Every metric, paired (difference of means; ratio of means; 95% intervals):</p>
{{template "table" .Diffs}}{{end}}
{{if .Variance}}<h2>Variance across samples</h2>
<p>Mean over tasks of the standard deviation across a task's samples:</p>
{{template "table" .Variance}}
<p>Per task, each sample's value:</p>
{{template "table" .PerTask}}{{end}}
{{if .Pairs}}<h2>Tasks one candidate solved and the other failed</h2>
<p>The last compressed context of each run (first sample) side by side; in red, the sentences with a fact (a number or a name) the compressor dropped from its input.</p>
<select id="pick">{{range $i, $p := .Pairs}}<option value="{{$i}}">{{$p.Task}} ({{$p.Comparison}})</option>{{end}}</select>
{{range $i, $p := .Pairs}}<div class="pair{{if eq $i 0}} shown{{end}}" data-index="{{$i}}">
{{template "side" $p.A}}{{template "side" $p.B}}
</div>{{end}}{{end}}{{end}}
{{range .Sections}}<h2>{{.Title}}</h2>
{{range .Paras}}<p>{{.}}</p>{{end}}
{{range .Tables}}{{if .Caption}}<p>{{.Caption}}</p>{{end}}{{template "table" .}}{{end}}
{{if .Pre}}<pre class="guideline">{{.Pre}}</pre>{{end}}{{end}}
<div id="tip"></div>
<script>
(function(){
  var tip=document.getElementById('tip');
  document.querySelectorAll('.plot .point').forEach(function(p){
    var t=p.querySelector('title');var text=t?t.textContent:'';
    p.addEventListener('mousemove',function(e){tip.textContent=text;tip.style.display='block';tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';});
    p.addEventListener('mouseleave',function(){tip.style.display='none';});
  });
  document.querySelectorAll('.legend').forEach(function(l){
    l.addEventListener('click',function(){
      var c=l.getAttribute('data-candidate');var off=!l.classList.contains('off');
      document.querySelectorAll('.legend,.series,.point').forEach(function(e){if(e.getAttribute('data-candidate')===c){e.classList.toggle('off',off);}});
    });
  });
  document.querySelectorAll('table').forEach(function(tb){
    tb.querySelectorAll('th').forEach(function(th,col){
      th.addEventListener('click',function(){
        var rows=Array.prototype.slice.call(tb.querySelectorAll('tbody tr'));var asc=th.getAttribute('data-asc')!=='1';
        th.setAttribute('data-asc',asc?'1':'0');
        rows.sort(function(a,b){var x=a.children[col].textContent,y=b.children[col].textContent;var nx=parseFloat(x.replace(/[^0-9.+-]/g,'')),ny=parseFloat(y.replace(/[^0-9.+-]/g,''));
          var r=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?r:-r;});
        rows.forEach(function(r){r.parentNode.appendChild(r);});
      });
    });
  });
  var pick=document.getElementById('pick');
  if(pick){pick.addEventListener('change',function(){document.querySelectorAll('.pair').forEach(function(d){d.classList.toggle('shown',d.getAttribute('data-index')===pick.value);});});}
})();
</script>
</body>
</html>
{{define "table"}}<table{{if .Wide}} class="wide"{{end}}><thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead><tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody></table>{{end}}
{{define "side"}}<div><h3 class="{{if .Success}}ok{{else}}fail{{end}}">{{.Candidate}}: {{if .Success}}solved{{else}}failed{{end}}</h3>
<pre>{{if .Summary}}{{.Summary}}{{else}}(no compression happened: the agent saw its full context){{end}}</pre>
{{if .Answer}}<p>last action: <code>{{.Answer}}</code></p>{{end}}
{{if .Dropped}}<p>Dropped from the compressor's input:</p><ul class="dropped">{{range .Dropped}}<li>{{.}}</li>{{end}}</ul>{{end}}</div>{{end}}
`))

type htmlTable struct {
	Caption string
	Head    []string
	Rows    [][]string
	// Wide tables may break their cells anywhere, even inside a number,
	// so that they still fit the page; others break only between words.
	Wide bool
}

// wideColumns is the most columns whose words fit the page side by side.
const wideColumns = 14

func (t table) html() htmlTable {
	return htmlTable{Head: t.head, Rows: t.rows, Wide: len(t.head) > wideColumns}
}

// htmlPage is what the page shows, in order: the verdict, the guideline
// and its diff, the evaluation's details, then a run's own sections.
type htmlPage struct {
	Title, Notice string
	Verdict       *htmlVerdict
	NoVerdict     string
	Guidelines    []htmlGuideline
	Eval          *htmlEval
	Sections      []htmlSection
}

type htmlVerdict struct {
	Heading string
	Promote bool
	Lines   []template.HTML
	Table   htmlTable
	Gate    template.HTML
	Rules   []template.HTML
}

func (v verdictView) html() *htmlVerdict {
	h := &htmlVerdict{Heading: v.Heading, Promote: v.Promote, Table: v.Table.html(), Gate: inline(v.Gate)}
	for _, l := range v.Lines {
		h.Lines = append(h.Lines, inline(l))
	}
	for _, r := range v.Rules {
		h.Rules = append(h.Rules, inline(r))
	}
	return h
}

type htmlGuideline struct {
	Heading, Text, DiffTitle string
	Diff                     []diffLine
}

type diffLine struct{ Class, Text string }

// diffLines classes a unified diff's lines for colouring.
func diffLines(d string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		c := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		}
		out = append(out, diffLine{c, l})
	}
	return out
}

type htmlEval struct {
	Reference, Intro               string
	Plots                          []template.HTML
	Candidates, Comparisons, Diffs htmlTable
	Variance, PerTask              *htmlTable
	Pairs                          []Disagreement
}

type htmlSection struct {
	Title  string
	Paras  []template.HTML
	Tables []htmlTable
	Pre    string
}

// inline renders the Markdown the report's sentences use (**bold** and
// `code`) as HTML, everything else escaped.
func inline(s string) template.HTML {
	var b strings.Builder
	bold, code := false, false
	for _, part := range inlineRE.FindAllString(s, -1) {
		switch part {
		case "**":
			if code {
				b.WriteString(part)
				continue
			}
			bold = !bold
			b.WriteString(map[bool]string{true: "<strong>", false: "</strong>"}[bold])
		case "`":
			code = !code
			b.WriteString(map[bool]string{true: "<code>", false: "</code>"}[code])
		default:
			b.WriteString(template.HTMLEscapeString(part))
		}
	}
	// Our own sentences, their parts escaped above.
	return template.HTML(b.String())
}

var inlineRE = regexp.MustCompile("\\*\\*|`|[^*`]+|\\*")

// evalHTML is the evaluation's part of a page.
func evalHTML(res *eval.Result, plots []Plot) *htmlEval {
	s := res.Summary
	e := &htmlEval{
		Reference: s.Reference, Intro: intro(s),
		Candidates: candidatesTable(res).html(), Comparisons: comparisonsTable(res).html(), Diffs: diffsTable(res).html(),
		Pairs: Disagreements(res),
	}
	for _, p := range plots {
		// Our own SVG, its text escaped where it was written.
		e.Plots = append(e.Plots, template.HTML(p.SVG))
	}
	if s.Samples > 1 {
		sd, per := varianceTables(res)
		v, pt := sd.html(), per.html()
		e.Variance, e.PerTask = &v, &pt
	}
	return e
}

// writePage renders p to path.
func writePage(path string, p htmlPage) error {
	var b bytes.Buffer
	if err := page.Execute(&b, p); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
