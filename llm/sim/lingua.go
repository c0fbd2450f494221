package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode"
)

// LinguaPath is the embedded model's LLMLingua-2 stand-in endpoint
// (docs/embedded-model.md, "LLMLingua stand-in").
const LinguaPath = "/llmlingua/compress"

// LinguaURL is the stand-in's URL, for compression.llmlingua.url.
func (s *Server) LinguaURL() string {
	return strings.TrimSuffix(s.url, "/v1") + LinguaPath
}

// linguaStopwords score lowest: function words carry the least information
// (LLMLingua-2 learns to drop them first).
var linguaStopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of is are was were be been to in on at by for with from and or but
		as that this it its which who whom what when where how than then so such into onto about over under
		do does did has have had not no yes there their they them he she his her we our you your i me my`) {
		linguaStopwords[w] = true
	}
}

// linguaScore is a word's information score: stopwords 0, words with a
// digit or capital 3, long words 2, the rest 1.
func linguaScore(w string) int {
	core := strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	switch {
	case core == "":
		return 0
	case linguaStopwords[strings.ToLower(core)]:
		return 0
	case strings.IndexFunc(core, func(r rune) bool { return unicode.IsDigit(r) || unicode.IsUpper(r) }) >= 0:
		return 3
	case len(core) >= 7:
		return 2
	}
	return 1
}

// linguaCompress keeps the highest-scoring rate share of the words of each
// line, in their order (ties go to the earlier word), and every line break.
// Deterministic: the same text and rate give the same output.
func linguaCompress(text string, rate float64, target int) string {
	lines := strings.Split(text, "\n")
	total := 0
	for _, l := range lines {
		total += len(strings.Fields(l))
	}
	if target > 0 && total > 0 {
		rate = min(1, float64(target)/float64(total))
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		words := strings.Fields(l)
		keep := int(float64(len(words))*rate + 0.5)
		if keep == 0 && len(words) > 0 {
			keep = 1
		}
		idx := make([]int, len(words))
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return linguaScore(words[idx[a]]) > linguaScore(words[idx[b]]) })
		chosen := idx[:keep]
		sort.Ints(chosen)
		kept := make([]string, len(chosen))
		for j, k := range chosen {
			kept[j] = words[k]
		}
		out[i] = strings.Join(kept, " ")
	}
	return strings.Join(out, "\n")
}

type linguaRequest struct {
	Context     json.RawMessage `json:"context"`
	Rate        float64         `json:"rate"`
	TargetToken int             `json:"target_token"`
}

func (h *handler) lingua(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req linguaRequest
	a, ok := h.admitJSON(w, r, &req)
	if !ok {
		return
	}
	var text string
	if err := json.Unmarshal(req.Context, &text); err != nil {
		var parts []string
		if err := json.Unmarshal(req.Context, &parts); err != nil {
			h.badRequest(ctx, w, a, "context: want a string or an array of strings")
			return
		}
		text = strings.Join(parts, "\n\n")
	}
	if req.TargetToken <= 0 && !(req.Rate > 0 && req.Rate <= 1) {
		h.badRequest(ctx, w, a, fmt.Sprintf("rate: %v; want more than 0 and at most 1, or a positive target_token", req.Rate))
		return
	}
	out := linguaCompress(text, req.Rate, req.TargetToken)
	orig, comp := h.tok.Count(text), h.tok.Count(out)
	rate := 1.0
	if orig > 0 {
		rate = float64(comp) / float64(orig)
	}
	h.reply(ctx, w, a, map[string]any{
		"compressed_prompt": out, "origin_tokens": orig, "compressed_tokens": comp,
		"ratio": fmt.Sprintf("%.1fx", 1/max(rate, 1e-9)), "rate": fmt.Sprintf("%.1f%%", 100*rate),
	})
}
