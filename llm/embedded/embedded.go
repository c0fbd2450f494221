// Package embedded is how the program starts its embedded offline model
// (llm/sim): the one constructor the runtime and `optimize sim` call, and
// the configuration and identity they need. The model is a test double;
// outside tests no package but this one imports it (TestSeam), so none
// comes to depend on how it reads prompts.
package embedded

import (
	"context"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// Config is the model's latency and fault injection: a job's `embedded`
// section and the flags of `optimize sim`.
type Config = sim.Config

// Server is a running model.
type Server = sim.Server

const (
	// BaseURL is the base_url value that selects the embedded model, in a
	// job's roles and in serve.yaml's endpoints alike.
	BaseURL = "embedded"
	// ModelName is the model it answers as when a request names none.
	ModelName = sim.ModelName
	// DefaultAddr listens on a free loopback port.
	DefaultAddr       = sim.DefaultAddr
	DefaultRetryAfter = sim.DefaultRetryAfter
	DefaultHang       = sim.DefaultHang
)

// Version identifies the model's behaviour: a hash of its code, part of
// every cache key and stage input it answers.
var Version = sim.Version

// Start serves the model on addr (DefaultAddr when empty) until ctx is
// cancelled or Close is called.
func Start(ctx context.Context, addr string, cfg Config) (*Server, error) {
	return sim.Start(ctx, addr, cfg)
}

// Understood lists the directives of guideline that the model's compressor
// acts on, in the words of docs/embedded-model.md; none means it
// compresses with its defaults whatever the guideline says.
func Understood(guideline string) []string { return sim.Understood(guideline) }
