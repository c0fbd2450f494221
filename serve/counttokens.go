package serve

import (
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// countTokens answers POST /v1/messages/count_tokens (Anthropic) itself,
// with the input tokens of the request the upstream would receive for
// these messages now: compressed with the session's summary as it stands
// (or cut as a request past the threshold without one would be), counted
// with compression.encoding: system prompt, tools' JSON and every message
// of that body. An agent that sizes its context by this count sees the
// compressed size, so it does not compact a conversation serve already
// keeps short. It starts no summary and sends nothing upstream.
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
	tools := gjson.GetBytes(body, "tools").Raw
	original := s.inputTokens(conv, tools)
	sent := original
	b, id, err := s.comp.measure(conv, tenant)
	if err == nil && b != nil {
		conv, err = parseConversation(formatAnthropic, b, nil)
		if err == nil {
			sent = s.inputTokens(conv, tools)
		}
	}
	if err != nil {
		apiError(w, formatAnthropic, http.StatusInternalServerError, "api_error", "could not compress the messages: "+err.Error())
		return
	}
	h := w.Header()
	h.Set(HeaderSession, id)
	h.Set(HeaderCompressed, strconv.FormatBool(b != nil))
	h.Set(HeaderTokensIn, strconv.Itoa(original))
	h.Set(HeaderTokensSent, strconv.Itoa(sent))
	writeJSON(w, map[string]int{"input_tokens": sent})
}

// inputTokens counts a decoded request: its system prompt, its tools'
// JSON and every message (an opaque one as the tokens of its JSON).
func (s *Server) inputTokens(conv *conversation, tools string) int {
	n := s.tok.Count(conv.system) + s.tok.Count(tools)
	for i, v := range conv.views {
		if conv.opaque[i] {
			n += s.tok.Count(conv.raw[i])
		}
		for _, m := range v {
			n += s.tok.CountMessage(m)
		}
	}
	return n
}

// measure is the body prepare would send for conv now, with no side
// effect (nil: as it is): below the threshold as sent, past it laid out
// by compose's own plan with the session's summary as it stands.
func (c *compactor) measure(conv *conversation, tenant string) (body []byte, session string, err error) {
	sp := c.prepareSpan(conv, tenant, c.cfg.KeepLast, c.cfg.keptTokens())
	if sp.headTok+sp.tail(conv.head) <= c.cfg.Threshold {
		return nil, sp.id, nil
	}
	_, body, err = c.plan(sp, c.session(sp))
	return body, sp.id, err
}
