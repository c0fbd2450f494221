package serve

import (
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// countTokens answers POST /v1/messages/count_tokens (Anthropic) itself,
// with the input tokens the upstream would receive for these messages
// now: compressed with the session's summary as it stands (or truncated
// as a request past the threshold without one would be), counted with
// compression.encoding, system prompt and tools' JSON included. An agent
// that sizes its context by this count sees the compressed size, so it
// does not compact a conversation serve already keeps short. It starts no
// summary and sends nothing upstream.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	tenant, body, ok := s.accept(w, r, formatAnthropic)
	if !ok {
		return
	}
	conv, err := parseConversation(formatAnthropic, body, nil)
	if err != nil {
		apiError(w, formatAnthropic, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	original, sent, id := s.comp.measure(conv, tenant)
	fixed := s.tok.Count(conv.system) + s.tok.Count(gjson.GetBytes(body, "tools").Raw)
	h := w.Header()
	h.Set(HeaderSession, id)
	h.Set(HeaderCompressed, strconv.FormatBool(sent < original))
	h.Set(HeaderTokensIn, strconv.Itoa(fixed+original))
	h.Set(HeaderTokensSent, strconv.Itoa(fixed+sent))
	writeJSON(w, map[string]int{"input_tokens": fixed + sent})
}

// measure is the size of conv's messages as sent and as prepare would send
// them now, with no side effect: below the threshold as they are; past it
// with the session's summary when that fits, else cut as bypass cuts.
func (c *compactor) measure(conv *conversation, tenant string) (original, sent int, session string) {
	sp := c.prepareSpan(conv, tenant, c.cfg.KeepLast, c.cfg.KeepTokens)
	original = sp.headTok + sp.tail(conv.head)
	if original <= c.cfg.Threshold {
		return original, original, sp.id
	}
	s := c.session(sp)
	if v := c.view(sp, s); v <= c.cfg.Threshold {
		return original, v, sp.id
	}
	if _, n, ok := c.bypassCut(sp, s); ok {
		return original, n, sp.id
	}
	return original, original, sp.id
}
