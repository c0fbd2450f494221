package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// foldedNote is the text a folded tool output is replaced by.
var foldedNote = sync.OnceValues(func() (string, error) {
	s, err := templates.Render("serve_folded.tmpl", nil)
	return strings.TrimSpace(s), err
})

// folding is how a compacted request lays out the turns after its
// summary's coverage: turns [from, drop) are left out (truncation), turns
// [drop, verbatim) go with their tool calls but their tool outputs folded
// (replaced by a note: the summary under way covers them), and the turns
// from verbatim on go as sent. Every turn kept keeps its calls and results
// paired.
type folding struct {
	drop, verbatim int
	// tokens is the size of the request laid out so.
	tokens int
}

// truncated reports whether f, laid out after summary s, leaves turns out
// to fit the threshold, however much is folded.
func (f folding) truncated(sp *span, s session) bool { return f.drop > sp.conv.head+s.Covered }

// foldedTok is the token count of raw message i with its tool outputs
// folded, where a folded output counts noteTok.
func (c *compactor) foldedTok(sp *span, i, noteTok int) int {
	n, tools := 0, false
	for _, m := range sp.conv.views[i] {
		if m.Role == "tool" {
			n += noteTok
			tools = true
		} else {
			n += c.tok.CountMessage(m)
		}
	}
	if !tools {
		return sp.tok[i] // as counted already
	}
	return n
}

// layout picks the folding of sp's turns after from (the summary's
// coverage) under fixed tokens of head and summary: the newest turns
// within keep_tokens (all, when unbounded) verbatim, at least the last turn;
// older outputs folded, more of them while the request passes the
// threshold; and, if it still does, the oldest turns left out.
func (c *compactor) layout(sp *span, from, fixed int, note string) folding {
	// Where the kept part may start: from itself, then each turn after.
	pts := sp.cuts[firstAt(sp.cuts, from):]
	if len(pts) == 0 || pts[0] != from {
		pts = append([]int{from}, pts...)
	}
	noteTok := c.tok.CountMessage(llm.Message{Role: "tool", Content: note})
	folded := make([]int, len(sp.tok))
	for i := from; i < pts[len(pts)-1]; i++ {
		folded[i] = c.foldedTok(sp, i, noteTok)
	}
	cost := func(drop, verbatim int) int {
		n := fixed + sp.tail(verbatim)
		for _, t := range folded[drop:verbatim] {
			n += t
		}
		return n
	}
	last, v, keep := len(pts)-1, 0, c.cfg.keptTokens()
	for v < last && (keep > 0 && sp.tail(pts[v]) > keep || cost(from, pts[v]) > c.cfg.Threshold) {
		v++
	}
	d := 0
	for d < v && cost(pts[d], pts[v]) > c.cfg.Threshold {
		d++
	}
	return folding{drop: pts[d], verbatim: pts[v], tokens: cost(pts[d], pts[v])}
}

// firstAt is the index of the first cut at or after from.
func firstAt(cuts []int, from int) int {
	i, _ := slices.BinarySearch(cuts, from)
	return i
}

// body is the request with summary before the turns laid out by f.
func (f folding) body(conv *conversation, summary, note string) ([]byte, error) {
	if f.verbatim > f.drop {
		fc := *conv
		fc.raw = slices.Clone(conv.raw)
		for i := f.drop; i < f.verbatim; i++ {
			r, err := foldOutputs(conv.format, conv.raw[i], note)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			fc.raw[i] = r
		}
		conv = &fc
	}
	return conv.withSummary(summary, f.drop)
}

// foldOutputs replaces the tool outputs of one raw message by note: an
// OpenAI tool message's content, or each tool_result block's content of
// an Anthropic user message. Other messages are returned as they are.
func foldOutputs(f apiFormat, raw, note string) (string, error) {
	var paths []string
	switch {
	case f == formatOpenAI && gjson.Get(raw, "role").Str == "tool":
		paths = []string{"content"}
	case f == formatAnthropic:
		gjson.Get(raw, "content").ForEach(func(k, b gjson.Result) bool {
			if b.Get("type").Str == "tool_result" {
				paths = append(paths, "content."+k.String()+".content")
			}
			return true
		})
	}
	q, err := json.Marshal(note)
	if err != nil {
		return "", err
	}
	// From the last: a splice leaves the offsets before it as they are.
	for _, p := range slices.Backward(paths) {
		if raw, err = splice(raw, p, q); err != nil {
			return "", err
		}
	}
	return raw, nil
}

// splice returns the JSON object raw with the value at path (which may be
// missing: a tool_result with no content) replaced by v.
func splice(raw, path string, v []byte) (string, error) {
	r := gjson.Get(raw, path)
	if r.Exists() && r.Index > 0 {
		return raw[:r.Index] + string(v) + raw[r.Index+len(r.Raw):], nil
	}
	// Missing, or gjson does not know where it is: decode the object the
	// value lives in and encode it again.
	parent, field := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, field = path[:i], path[i+1:]
	}
	obj := raw
	if parent != "" {
		p := gjson.Get(raw, parent)
		if p.Index <= 0 {
			return "", fmt.Errorf("cannot locate %s", parent)
		}
		obj = p.Raw
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		return "", err
	}
	m[field] = v
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if parent == "" {
		return string(b), nil
	}
	p := gjson.Get(raw, parent)
	return raw[:p.Index] + string(b) + raw[p.Index+len(p.Raw):], nil
}
