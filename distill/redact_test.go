package distill

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/redact/redacttest"
	"github.com/ctxopt/ctxopt/rollout"
)

// TestRedactionCorpus is the acceptance check of the exports: every shape
// of every secret kind goes through a build, and no output file, Parquet
// included, gives back any of them, or a piece of one, raw, URL-decoded,
// base64-decoded, JSON-unescaped or line-joined.
func TestRedactionCorpus(t *testing.T) {
	run := t.TempDir()
	kinds := map[string]bool{}
	var trajs []rollout.Trajectory
	n := 0
	for _, s := range redacttest.Samples() {
		kinds[s.Kind] = true
		for _, sh := range redacttest.Shapes(s) {
			ev := event(compress.KindHistory, fmt.Sprintf("observation %d (%s): %s", n, sh.Name, sh.Text), "kept: "+sh.Text)
			trajs = append(trajs, success(fmt.Sprintf("task-%03d", n), ev))
			n++
		}
	}
	if len(kinds) != 13 {
		t.Fatalf("the corpus has %d secret kinds, want 13", len(kinds))
	}
	writeRun(t, run, trajs...)
	out := filepath.Join(t.TempDir(), "ds")
	if _, err := Build(t.Context(), run, out, Options{RedactEmails: true, ValidationFraction: new(0.3)}); err != nil {
		t.Fatal(err)
	}
	// Each output is decoded once, for every sample to be looked for in it.
	var texts []redacttest.Decoded
	for path, data := range treeContents(t, out) {
		if strings.HasSuffix(path, ".parquet") {
			data = []byte(strings.Join(parquetStrings(t, filepath.Join(out, path)), "\n"))
		}
		texts = append(texts, redacttest.Decode(string(data)))
	}
	leaks := 0
	for _, s := range redacttest.Samples() {
		for _, text := range texts {
			if got := text.Recovered(s); got != "" {
				t.Errorf("%s secret: %q is recoverable from an output", s.Kind, got)
				leaks++
				break
			}
		}
	}
	t.Logf("%d secret kinds, %d texts: %d recoverable", len(kinds), n, leaks)
}
