package pipeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestStageInputsNameTheEmbeddedModelVersion: the response cache keys of
// the embedded model, and the stages it answers, carry its version, so a
// newer build neither reads its older answers nor skips or reuses stages.
func TestStageInputsNameTheEmbeddedModelVersion(t *testing.T) {
	job := smallJob(t, 2, "")
	rt, err := Open(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.EmbeddedVersion() != sim.Version {
		t.Fatalf("EmbeddedVersion() = %q, want %q", rt.EmbeddedVersion(), sim.Version)
	}
	c := llm.RoleConfig{BaseURL: Embedded}
	if err := rt.resolveEmbedded(t.Context(), &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.CacheEndpoint, "@"+sim.Version) {
		t.Errorf("cache endpoint %q does not name the version %s", c.CacheEndpoint, sim.Version)
	}
	b, err := json.Marshal(rt.ModelInputs())
	if err != nil {
		t.Fatal(err)
	}
	if want := `"embedded_version":"` + sim.Version + `"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("role inputs %s lack %s", b, want)
	}
}
