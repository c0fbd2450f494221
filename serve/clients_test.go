package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestOfficialClients drives the proxy with the official openai and
// @anthropic-ai/sdk npm packages (scripts/serve-clients.mjs) in front of the
// embedded model: a hello world (one user message, no role header, no
// tools) gets 200 and the model's fixed reply in both SDKs, and every
// request the upstream received keeps each tool call followed by its
// result, compressed or not.
func TestOfficialClients(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	_, oaErr := os.Stat(filepath.Join(root, ".cache/node/node_modules/openai"))
	_, anErr := os.Stat(filepath.Join(root, ".cache/node/node_modules/@anthropic-ai/sdk"))
	if nodeErr != nil || oaErr != nil || anErr != nil {
		msg := "node and the openai and @anthropic-ai/sdk packages in .cache/node are needed; run scripts/install-test-tools.sh"
		if os.Getenv("CTXOPT_REQUIRE_NODE_SDKS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	const key = "sdk-test-client-key"
	up := newRecUpstream(t, sim.Config{})
	dir, promoted, _ := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	cfg.Auth = Auth{KeyHashes: []string{HashKey(key)}}
	_, url := start(t, cfg)

	cmd := exec.CommandContext(t.Context(), node, filepath.Join(root, "scripts/serve-clients.mjs"), url, key, "8", sim.ChatReply)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	checks := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Check      string          `json:"check"`
			OK         bool            `json:"ok"`
			Detail     json.RawMessage `json:"detail"`
			Compressed int             `json:"compressed"`
			Saved      int             `json:"saved"`
			Guideline  string          `json:"guideline"`
			Backend    string          `json:"backend"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		checks++
		if !r.OK {
			t.Errorf("%s failed: %s", r.Check, r.Detail)
		}
		if strings.HasSuffix(r.Check, "long tool conversation") {
			t.Logf("%s: %d of 8 steps compressed, %d tokens saved, guideline %s, backend %s", r.Check, r.Compressed, r.Saved, r.Guideline, r.Backend)
			if r.Guideline != promoted {
				t.Errorf("%s: guideline header %q, want %s", r.Check, r.Guideline, promoted)
			}
		}
	}
	if runErr != nil || checks != 13 {
		t.Fatalf("serve-clients: %v, %d checks\n%s", runErr, checks, stderr.String())
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	summaries := 0
	for i, b := range up.bodies {
		f := formatOpenAI
		if up.paths[i] == "/v1/messages" {
			f = formatAnthropic
		}
		if bytes.Contains(b, []byte("older turns were compressed")) {
			summaries++
		}
		checkPairsIn(t, f, b)
	}
	if summaries == 0 {
		t.Error("no upstream request carried a summary")
	}
}
