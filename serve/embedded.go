package serve

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ctxopt/ctxopt/llm/embedded"
)

// startEmbedded starts the embedded offline model when an endpoint of cfg
// is embedded.BaseURL, and points those endpoints at it: serve.example.yaml
// then starts with no upstream and no key, and a plain chat gets the
// model's fixed reply (docs/embedded-model.md). nil when no endpoint names
// it. The model is a test double: it says so in the log.
func startEmbedded(cfg *Config) (*embedded.Server, error) {
	urls := []*string{&cfg.Upstream.OpenAI.BaseURL, &cfg.Upstream.Anthropic.BaseURL,
		&cfg.Compressor.Student.BaseURL, &cfg.Compressor.Teacher.BaseURL}
	var uses []*string
	for _, u := range urls {
		if *u == embedded.BaseURL {
			uses = append(uses, u)
		}
	}
	if len(uses) == 0 {
		return nil, nil
	}
	srv, err := embedded.Start(context.Background(), "", embedded.Config{})
	if err != nil {
		return nil, fmt.Errorf("embedded model: %w", err)
	}
	for _, u := range uses {
		*u = srv.URL()
	}
	slog.Warn("the embedded offline model answers the endpoints set to base_url: embedded; it is a deterministic test double, not a language model",
		"url", srv.URL(), "version", embedded.Version)
	return srv, nil
}
