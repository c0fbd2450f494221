package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/templates"
)

// replay is an OpenAI-compatible server on loopback that answers the first
// calls of a purpose with replies a real model (Gemma 3 270M on llama.cpp,
// `make real`) gave, and passes every other call to the embedded model.
type replay struct {
	mu      sync.Mutex
	seen    map[string]int
	replies map[string][]http.HandlerFunc
	next    http.Handler
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	purpose := r.Header.Get(llm.RoleHeader)
	p.mu.Lock()
	n := p.seen[purpose]
	p.seen[purpose]++
	p.mu.Unlock()
	if r.URL.Path == "/v1/chat/completions" && n < len(p.replies[purpose]) {
		p.replies[purpose][n](w, r)
		return
	}
	p.next.ServeHTTP(w, r)
}

// chat answers with one assistant message.
func chat(content string, toolCalls ...map[string]any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		msg := map[string]any{"role": "assistant", "content": content}
		if len(toolCalls) > 0 {
			msg["tool_calls"] = toolCalls
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-replay", "object": "chat.completion", "model": "gemma-3-270m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}},
			"usage":   map[string]int{"prompt_tokens": 100, "completion_tokens": 20},
		})
	}
}

// The error llama.cpp answers when the model's output does not fit the
// tool-call format its chat template implies (seen with tool_choice auto).
func pegError(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write([]byte(`{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}`))
}

// TestRunSurvivesRealModelReplies replays the replies of a real model that
// the code once assumed away: the server's own parse failure, no tool call,
// tool arguments that are not JSON, an empty summary, prose around the
// analysis JSON, a candidate wrapped in prose and fences, and a candidate
// that is not a template. The run completes, every event is counted per
// role and recorded with its raw reply, and the fenced candidate is used.
func TestRunSurvivesRealModelReplies(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	ctx := context.Background()
	s, err := sim.Start(ctx, "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	target, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	seed, err := templates.Source(prompts(compress.Prompting)[compress.KindHistory])
	if err != nil {
		t.Fatal(err)
	}
	badArgs := map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "search", "arguments": `{"query": "capital of`}}
	p := &replay{seen: map[string]int{}, next: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}), replies: map[string][]http.HandlerFunc{
		string(llm.PurposeAgent): {
			pegError,
			chat("You may call one of these tools. To call a tool, reply with only a JSON object"),
			chat("", badArgs), chat("", badArgs), chat("", badArgs),
		},
		string(llm.PurposeCompressor): {chat("")},
		string(llm.PurposeAnalyzer):   {chat("The compressed run lost the dates.")},
		string(llm.PurposeOptimizer): {
			chat("Here is the updated guideline:\n\n```jinja\n" + seed + "\n```\n\nIt keeps every fact the agent needs."),
			chat("Sure! I will make the summary shorter and keep the facts."),
		},
	}}
	fake := httptest.NewServer(p)
	t.Cleanup(fake.Close)

	// Four tasks reach every replayed reply (they go to the first calls):
	// two give the UT step its feedback, two select its candidates.
	job := smallJob(t, 4, "")
	job.Optimize.Candidates = 2
	job.Rollout.Concurrency = 1 // the replayed replies go to the first calls in order
	job.Cache.Disabled = true
	for _, c := range []*llm.RoleConfig{&job.Roles.Agent, &job.Roles.Compressor, &job.Roles.Optimizer} {
		c.BaseURL = fake.URL + "/v1"
		c.MaxRetries = -1
	}
	dir := t.TempDir()
	sum, err := Run(ctx, job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}

	kinds := map[llm.MalformedKind]int{}
	f, err := os.Open(filepath.Join(dir, MalformedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	perRole := map[string]int64{}
	prose := 0 // the replayed prose candidate, recorded with its raw reply
	for sc.Scan() {
		var m llm.MalformedReply
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", MalformedFile, err)
		}
		kinds[m.Kind]++
		perRole[m.Role]++
		if m.Kind == llm.MalformedUnparsed && !strings.Contains(m.Raw, "peg-native") {
			t.Errorf("server parse failure recorded without the server's message: %+v", m)
		}
		if m.Kind == llm.MalformedCandidate && strings.Contains(m.Raw, "Sure! I will") {
			prose++
		}
	}
	want := map[llm.MalformedKind]int{
		llm.MalformedUnparsed: 1, llm.MalformedNoToolCall: 1, llm.MalformedToolArguments: 3,
		llm.MalformedEmptySummary: 1, llm.MalformedAnalysis: 1, llm.MalformedCandidate: 1,
	}
	for k, n := range want {
		if kinds[k] < n {
			t.Errorf("%s recorded %d times, want at least %d (all: %v)", k, kinds[k], n, kinds)
		}
	}
	if prose != 1 {
		t.Errorf("the prose candidate is recorded %d times with its raw reply, want once", prose)
	}
	for role, n := range perRole {
		if got := sum.Roles[role].Malformed; got != n {
			t.Errorf("role %s: summary counts %d malformed replies, %s holds %d", role, got, MalformedFile, n)
		}
	}
	t.Logf("kinds %v, per role %v, UT feedback tasks %v, selection tasks %v", kinds, perRole, sum.Rounds[0].UT.FeedbackTasks, sum.Rounds[0].UT.Tasks)
	ut := sum.Rounds[0].UT
	if len(ut.Candidates) != 2 || !ut.Candidates[0].Valid || ut.Candidates[1].Valid {
		t.Fatalf("UT candidates: want the fenced one valid and the prose one rejected, got %+v", ut.Candidates)
	}
}

// TestRecordMalformedMendsTail resumes the malformed replies log a killed
// run left: the next record is a line of its own, after every whole one.
func TestRecordMalformedMendsTail(t *testing.T) {
	old := `{"role":"agent","purpose":"agent","kind":"no_tool_call","raw":"x"}`
	tests := []struct {
		name, file string
		whole      int // records kept
	}{
		{"empty", "", 0},
		{"complete", old + "\n", 1},
		{"torn last line", old + "\n" + old[:20], 1},
		{"last record without its newline", old + "\n" + old, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), MalformedFile)
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			rt := &Runtime{}
			if err := rt.RecordMalformed(path); err != nil {
				t.Fatal(err)
			}
			rt.malformed.write(llm.MalformedReply{Role: "agent", Purpose: llm.PurposeAgent, Kind: "next", Raw: "y"})
			if err := rt.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if len(lines) != tc.whole+1 || !strings.HasSuffix(string(data), "\n") {
				t.Fatalf("log %q, want %d whole records and the new one", data, tc.whole)
			}
			for i, l := range lines {
				var m llm.MalformedReply
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("line %d %q: %v", i+1, l, err)
				}
				if want := i == tc.whole; (m.Kind == "next") != want {
					t.Errorf("line %d is %q", i+1, l)
				}
			}
		})
	}
}
