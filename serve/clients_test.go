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
// tools) gets 200 and the model's fixed reply in both SDKs, the Responses
// API works plain, streamed and with tool calls and is compressed when
// long, count_tokens returns the compressed size, an agent's compaction
// request is answered from the summary (agent_compaction on), and every
// request the upstream received keeps each tool call followed by its
// result, compressed or not.
func TestOfficialClients(t *testing.T) {
	up, checks := runClients(t, true, "")
	if checks != 20 {
		t.Fatalf("serve-clients: %d checks, want 20", checks)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	summaries := map[string]int{}
	for i, b := range up.bodies {
		f := formatOpenAI
		switch up.paths[i] {
		case "/v1/messages":
			f = formatAnthropic
		case "/v1/responses":
			f = formatResponses
		}
		if bytes.Contains(b, []byte("older turns were compressed")) {
			summaries[up.paths[i]]++
		}
		checkPairsIn(t, f, b)
	}
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		if summaries[p] == 0 {
			t.Errorf("no upstream request to %s carried a summary", p)
		}
	}
}

// TestOfficialClientsCompactionOff: with agent_compaction off, the
// compaction request goes upstream and the model answers it.
func TestOfficialClientsCompactionOff(t *testing.T) {
	if _, checks := runClients(t, false, "compaction"); checks != 1 {
		t.Fatalf("serve-clients: %d checks, want 1", checks)
	}
}

// runClients runs scripts/serve-clients.mjs against a server in front of
// the embedded model, with agent_compaction on or off and only the checks
// whose name contains only, and returns the upstream and the number of
// checks that ran (each failed one fails t).
func runClients(t *testing.T, compaction bool, only string) (*upstreamRec, int) {
	t.Helper()
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
	cfg.AgentCompaction.Enabled = compaction
	_, url := start(t, cfg)

	mode := map[bool]string{true: "on", false: "off"}[compaction]
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(root, "scripts/serve-clients.mjs"), url, key, "8", sim.ChatReply, mode, only)
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
		} else if strings.HasPrefix(r.Check, "anthropic co") {
			t.Logf("%s: %s", r.Check, r.Detail)
		}
	}
	if runErr != nil {
		t.Fatalf("serve-clients: %v, %d checks\n%s", runErr, checks, stderr.String())
	}
	return up, checks
}
