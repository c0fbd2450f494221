package serve

import "net/http"

// passthrough forwards a request to the OpenAI upstream unchanged (POST
// /v1/embeddings, /v1/completions, /v1/responses/compact): the client key,
// rate limit and body bound apply as on every route, and the answer comes
// back as it is, streams included. Nothing in these bodies is a
// conversation serve could compress; a compaction answer is the
// provider's own, opaque to serve.
func (s *Server) passthrough() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, body, ok := s.accept(w, r, formatOpenAI)
		if !ok {
			return
		}
		s.forward(w, r, s.openai, tenant, body)
	})
}
