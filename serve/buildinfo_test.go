package serve

import (
	"fmt"
	"testing"

	"github.com/ctxopt/ctxopt/internal/version"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestMetricsBuildInfo: /metrics says which build serves, with the labels
// `optimize version` prints.
func TestMetricsBuildInfo(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	v := version.Get()
	// The exposition format sorts labels by name.
	series := fmt.Sprintf(`ctxopt_build_info{embedded_model=%q,goversion=%q,revision=%q,version=%q}`,
		v.EmbeddedModel, v.GoVersion, v.RevisionLabel(), v.Version)
	if n := metric(t, url, series); n != 1 {
		t.Errorf("%s = %v, want 1", series, n)
	}
}
