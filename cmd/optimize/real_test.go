package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/pipeline"
)

// pegNative is llama.cpp's answer when Gemma 3 270M's output does not fit
// the tool-call parser of its chat template (make real, tool_choice auto).
const pegNative = `{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}`

// llamaCppAgent replays what the real agent got from llama.cpp: 500 unless
// the request says tool_choice required, then a finish call.
func llamaCppAgent(t *testing.T) (url string, required *atomic.Int64) {
	required = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ToolChoice string `json:"tool_choice"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		w.Header().Set("Content-Type", "application/json")
		if req.ToolChoice != llm.ToolChoiceRequired {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, pegNative)
			return
		}
		required.Add(1)
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,`+
			`"tool_calls":[{"type":"function","id":"c1","function":{"name":"finish","arguments":"{\"answers\": [\"x\"]}"}}]}}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", required
}

// TestRolloutRecordsMalformed: optimize rollout writes malformed.jsonl
// beside its trajectories (as optimize run does), with the server's raw
// reply; the agent's tool_choice from the job reaches the server and, set
// to required, avoids the 500.
func TestRolloutRecordsMalformed(t *testing.T) {
	for _, choice := range []string{"", llm.ToolChoiceRequired} {
		t.Run("tool_choice "+choice, func(t *testing.T) {
			url, required := llamaCppAgent(t)
			dir := t.TempDir()
			cfg := writeJob(t, dir, func(s string) string {
				const embedded = "  agent:\n    base_url: embedded\n    model: ctxopt-sim\n"
				if !strings.Contains(s, embedded) {
					t.Fatal("jobs/demo.yaml changed its agent role; update this test")
				}
				agent := "  agent:\n    base_url: " + url + "\n    model: gemma-3-270m\n    no_key: true\n"
				if choice != "" {
					agent += "    tool_choice: " + choice + "\n"
				}
				s = strings.Replace(s, embedded, agent, 1)
				return strings.Replace(s, "step_limit: 30", "step_limit: 3", 1)
			})
			out := filepath.Join(dir, "out")
			code, stdout, stderr := runCLI(t, "rollout", "--config", cfg, "--split", "test", "--limit", "2", "--out", out)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			b, err := os.ReadFile(filepath.Join(out, pipeline.MalformedFile))
			if err != nil {
				t.Fatal(err)
			}
			var recs []llm.MalformedReply
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if line == "" {
					continue
				}
				var m llm.MalformedReply
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				recs = append(recs, m)
			}
			if choice == llm.ToolChoiceRequired {
				if len(recs) != 0 || required.Load() != 2 {
					t.Errorf("tool_choice required: %d malformed records, %d required calls; want 0 and one finish per task", len(recs), required.Load())
				}
				return
			}
			// Two tasks of three steps, every agent call a 500.
			if len(recs) != 6 || required.Load() != 0 {
				t.Fatalf("%d malformed records, want 6:\n%s", len(recs), b)
			}
			for _, m := range recs {
				if m.Role != "agent" || m.Kind != llm.MalformedUnparsed || !strings.Contains(m.Raw, "peg-native") {
					t.Errorf("record %+v", m)
				}
			}
			if !strings.Contains(stdout, "malformed") {
				t.Errorf("the role table does not count malformed replies:\n%s", stdout)
			}
		})
	}
}
