package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
)

// CompressRequest is the body of POST /v1/compress. Messages are in the
// OpenAI chat format; when Task is empty the first user message is the task.
type CompressRequest struct {
	Kind            string          `json:"kind"`
	Messages        json.RawMessage `json:"messages,omitempty"`
	Text            string          `json:"text,omitempty"`
	Task            string          `json:"task,omitempty"`
	Plan            []string        `json:"plan,omitempty"`
	PreviousSummary string          `json:"previous_summary,omitempty"`
	KeepLast        int             `json:"keep_last,omitempty"`
	TargetTokens    int             `json:"target_tokens,omitempty"`
	Guideline       string          `json:"guideline,omitempty"`
	Backend         string          `json:"backend,omitempty"`
}

// CompressUsage counts the tokens of a compression.
type CompressUsage struct {
	Original         int     `json:"original_tokens"`
	Compressed       int     `json:"compressed_tokens"`
	Ratio            float64 `json:"ratio"`
	CompressorInput  int     `json:"compressor_input_tokens"`
	CompressorOutput int     `json:"compressor_output_tokens"`
}

// CompressResponse is the answer of POST /v1/compress.
type CompressResponse struct {
	Messages json.RawMessage `json:"messages,omitempty"`
	// Summary is the history summary; Text the refined observation.
	Summary     string        `json:"summary,omitempty"`
	Text        string        `json:"text,omitempty"`
	Usage       CompressUsage `json:"usage"`
	Model       string        `json:"model,omitempty"`
	GuidelineID string        `json:"guideline_id,omitempty"`
	Backend     string        `json:"backend"`
	Chain       []attempt     `json:"chain"`
	LatencyMS   float64       `json:"latency_ms"`
	// Skipped is true when nothing needed compressing.
	Skipped bool `json:"skipped"`
}

func (s *Server) compressAPI(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	tenant, body, ok := s.accept(w, r, formatOpenAI)
	if !ok {
		return
	}
	bad := func(format string, args ...any) {
		apiError(w, formatOpenAI, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(format, args...))
	}
	var req CompressRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		bad("body: %v", err)
		return
	}
	kind := guideline.KindHistory
	if req.Kind != "" {
		k, err := guideline.ParseKind(req.Kind)
		if err != nil {
			bad("kind: %v", err)
			return
		}
		kind = k
	}
	first := ""
	switch req.Backend {
	case "", "auto":
	case LinkStudent, LinkTeacher:
		first = req.Backend
		if !s.comp.chain.has(first) {
			bad("backend: no %s is configured (compressor.%s.base_url)", first, first)
			return
		}
	default:
		bad("backend: %q; want auto, student or teacher", req.Backend)
		return
	}
	if req.KeepLast < 0 || req.TargetTokens < 0 {
		bad("keep_last and target_tokens must not be negative")
		return
	}
	switch {
	case kind == guideline.KindHistory && len(req.Messages) == 0:
		bad("messages: required for kind history")
		return
	case kind == guideline.KindObservation && req.Text == "":
		bad("text: required for kind observation (the observation to compress)")
		return
	}
	g, err := s.gl.get(kind, req.Guideline)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, guideline.ErrNotFound) {
			status = http.StatusNotFound
		}
		apiError(w, formatOpenAI, status, "invalid_request_error", "guideline: "+err.Error())
		return
	}
	var conv *conversation
	if len(req.Messages) > 0 {
		if conv, err = parseConversation(formatOpenAI, body, nil); err != nil {
			bad("%v", err)
			return
		}
	}
	var resp CompressResponse
	if kind == guideline.KindHistory {
		resp, err = s.compressHistory(r, req, conv, g, first, tenant)
	} else {
		resp = s.compressObservation(r, req, conv, g, first)
	}
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		apiError(w, formatOpenAI, http.StatusInternalServerError, "api_error", err.Error())
		return
	}
	resp.LatencyMS = float64(time.Since(t0).Microseconds()) / 1000
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// compressHistory folds all but the last keep_last turns of the messages
// into a summary, unless the conversation fits target_tokens (default:
// compression.threshold).
func (s *Server) compressHistory(r *http.Request, req CompressRequest, conv *conversation, g *activeGuideline, first, tenant string) (CompressResponse, error) {
	// A keep_last the request names is kept whole; the configured one is
	// bounded by keep_tokens, as the proxy bounds it.
	keep, keepTokens := req.KeepLast, 0
	if keep == 0 {
		keep, keepTokens = s.cfg.Compression.KeepLast, s.cfg.Compression.keptTokens()
	}
	target := req.TargetTokens
	if target == 0 {
		target = s.cfg.Compression.Threshold
	}
	sp := s.comp.prepareSpan(conv, tenant, keep, keepTokens)
	task := conv.task()
	if req.Task != "" {
		task = req.Task
	}
	orig := sp.headTok + sp.tail(conv.head) + s.tok.Count(req.PreviousSummary)
	resp := CompressResponse{Usage: CompressUsage{Original: orig, Compressed: orig, Ratio: 1}, GuidelineID: g.id, Chain: []attempt{}}
	if sp.cut == conv.head || orig <= target {
		resp.Skipped = true
		resp.Summary = req.PreviousSummary
		resp.Messages = json.RawMessage(conv.msgs.Raw)
		return resp, nil
	}
	in := historyInput(task, req.Plan, sp.history, req.PreviousSummary, 0, sp.off[sp.cut], orig)
	res, linkName, tried := s.comp.chain.summarize(r.Context(), in, g, first)
	cut := conv.head
	for cut < len(conv.raw) && sp.off[cut] < res.Covered {
		cut++
	}
	body, err := conv.withSummary(res.Summary, cut)
	if err != nil {
		return resp, err
	}
	resp.Messages = json.RawMessage(gjson.GetBytes(body, "messages").Raw)
	resp.Summary, resp.Backend, resp.Chain = strings.TrimSpace(res.Summary), linkName, tried
	resp.Usage.Compressed = sp.headTok + s.tok.Count(resp.Summary) + sp.tail(cut)
	resp.Usage.Ratio = float64(resp.Usage.Compressed) / float64(max(1, orig))
	if ev := res.Event; ev != nil {
		resp.Model = ev.Model
		resp.Usage.CompressorInput = ev.Usage.PromptTokens
		resp.Usage.CompressorOutput = ev.Usage.CompletionTokens
	}
	s.m.compressions.WithLabelValues(linkName, "api").Inc()
	return resp, nil
}

// compressObservation refines the text given the task and the messages
// (the context so far), unless it fits target_tokens (default ACON's T_obs,
// compress.DefaultObservationThreshold), which is also the truncation
// fallback's budget.
func (s *Server) compressObservation(r *http.Request, req CompressRequest, conv *conversation, g *activeGuideline, first string) CompressResponse {
	target := req.TargetTokens
	if target == 0 {
		target = compress.DefaultObservationThreshold
	}
	orig := s.tok.Count(req.Text)
	resp := CompressResponse{Usage: CompressUsage{Original: orig, Compressed: orig, Ratio: 1}, GuidelineID: g.id, Chain: []attempt{}}
	if orig <= target {
		resp.Skipped, resp.Text = true, req.Text
		return resp
	}
	in := compress.ObservationInput{Task: req.Task, Plan: req.Plan, Summary: req.PreviousSummary, Observation: req.Text, FirstStep: 1}
	if conv != nil {
		in.Context = conv.flat(conv.head, len(conv.raw))
		if in.Task == "" {
			in.Task = conv.task()
		}
		// Context starts with the task message, as in a rollout.
		in.Context = append([]llm.Message{{Role: "user", Content: in.Task}}, in.Context...)
	}
	text, ev, linkName, tried := s.comp.chain.refine(r.Context(), in, g, first, target)
	resp.Text, resp.Backend, resp.Chain = text, linkName, tried
	resp.Usage.Compressed = s.tok.Count(text)
	resp.Usage.Ratio = float64(resp.Usage.Compressed) / float64(max(1, orig))
	if ev != nil {
		resp.Model = ev.Model
		resp.Usage.CompressorInput = ev.Usage.PromptTokens
		resp.Usage.CompressorOutput = ev.Usage.CompletionTokens
	}
	s.m.compressions.WithLabelValues(linkName, "api").Inc()
	return resp
}
