package serve

import (
	"fmt"
	"net/http"
	"strings"
)

// methods are those a route may be registered for.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers what mux has no route for, in the shape of the API the
// path or headers name: 405 with Allow when the path is served for other
// methods, else 404. The mux's own answers are plain text, which SDKs
// report as an unreadable error.
func (s *Server) noRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := formatOpenAI
		if isAnthropicPath(r) {
			f = formatAnthropic
		}
		var allow []string
		for _, m := range methods {
			if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			apiError(w, f, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf("%s %s: method not allowed; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		typ := "invalid_request_error"
		if f == formatAnthropic {
			typ = "not_found_error"
		}
		apiError(w, f, http.StatusNotFound, typ, fmt.Sprintf("no route %s %s; serve answers /v1/chat/completions, /v1/responses, "+
			"/v1/embeddings, /v1/completions, /v1/models, /v1/messages, /v1/messages/count_tokens and /v1/compress (with or without /v1)", r.Method, r.URL.Path))
	})
}

// isAnthropicPath reports whether r is meant for the Anthropic API: its
// path is under /messages, or it carries Anthropic's version header.
func isAnthropicPath(r *http.Request) bool {
	p := strings.TrimPrefix(r.URL.Path, "/v1")
	return p == "/messages" || strings.HasPrefix(p, "/messages/") || r.Header.Get("Anthropic-Version") != ""
}
