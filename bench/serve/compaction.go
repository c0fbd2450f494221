package main

// The compaction phase: long tool-using conversations through serve with a
// slow summarizer (issue 29). Each run starts its own upstream and
// summarizer (the embedded model, in this process, the summarizer slowed
// by its latency injection) and its own serve, so the summarizer's request
// count is the run's summarizer calls. Between the client and the upstream
// a recorder notes when each request arrives (serve held it for the
// difference) and checks what serve sent: its tokens, every tool call
// paired with its result, the last tool result verbatim, and the tool
// outputs sent folded (any content but the scripted output). The
// conversations are scripted, not the embedded agent's, so every binary
// and summarizer sees the same requests and the figures are paired.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
)

// compactionOptions are the phase's flags.
type compactionOptions struct {
	summarizer    []time.Duration
	conversations int
	turns         int
	threshold     int
	turnLatency   time.Duration
	// maxWait, keepTokens, linkLatency and linkConcurrency, when set, are
	// this build's compression.max_wait, compression.keep_tokens and its
	// teacher's latency and concurrency (a baseline build may have no
	// such settings; it runs with its defaults).
	maxWait, linkLatency        string
	keepTokens, linkConcurrency int
	// held is the time serve holds a request beyond which it is counted
	// as slow for any reason (counting tokens and forwarding take a few
	// milliseconds on a quiet machine).
	held time.Duration
}

// binary is one optimize build the phase runs: this tree's, and today's
// when --baseline names one.
type binary struct{ name, path string }

func compactionPhase(o options, registry string) error {
	bins := []binary{{"serve", o.optimize}}
	if o.baseline != "" {
		bins = append(bins, binary{"baseline", o.baseline})
	}
	c := o.compaction
	fmt.Printf("compaction: %d conversations x %d tool-using turns at once, threshold %d tokens, trigger 0.8; this build's settings: %s; upstream = embedded model answering in %s; holds over %s are counted too\n",
		c.conversations, c.turns, c.threshold, c.settings(), c.turnLatency, c.held)
	convs := scriptConversations(c.conversations, c.turns)
	for i, lat := range c.summarizer {
		order := slices.Clone(bins)
		if i%2 == 1 {
			slices.Reverse(order) // neither build always runs first
		}
		for _, b := range order {
			r, err := compactionRun(o, c, b, lat, registry, convs)
			if err != nil {
				return fmt.Errorf("compaction %s %s: %w", b.name, lat, err)
			}
			r.print(b.name, lat)
		}
	}
	return nil
}

// turn is one scripted step: the assistant's tool call and its result.
type turn struct{ call, result json.RawMessage }

// scriptConversations writes n conversations of turns search calls, each
// answered by three passages, about 500 tokens, each with one fact
// and survey notes the summarizer leaves out.
func scriptConversations(n, turns int) [][]turn {
	rels := []string{"river", "capital", "founder", "mountain", "language", "currency"}
	out := make([][]turn, n)
	for c := range out {
		for t := range turns {
			id := fmt.Sprintf("call_%d_%d", c, t)
			q := fmt.Sprintf("%s of Ostrel%d-%d", rels[t%len(rels)], c, t)
			call, _ := json.Marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{
				{"id": id, "type": "function", "function": map[string]any{"name": "search", "arguments": `{"query":"` + q + `"}`}},
			}})
			var b strings.Builder
			for j := range 3 {
				fmt.Fprintf(&b, "[%d] (doc d%d-%d-%d) The %s of Ostrel%d-%d-%d is Vell%d%d%d.", j+1, c, t, j, rels[(t+j)%len(rels)], c, t, j, c, t, j)
				for k := range 4 {
					fmt.Fprintf(&b, " Survey %d of the valley, sheet %d, records flood marks on the east bank, the mill weirs and the farm tracks that the spring water covers each year.", t*10+j, k)
				}
				b.WriteString("\n\n")
			}
			res, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": id, "content": b.String()})
			out[c] = append(out[c], turn{call: call, result: res})
		}
	}
	return out
}

// sent is what the recorder saw of one request.
type sent struct {
	arrived time.Time
	// summary is the tokens of the summary message, 0 without one.
	summary  int
	tokens   int
	badPairs int
	lastOK   bool
	// folded is the tool messages sent without their output.
	folded int
}

// recorder is the upstream serve talks to: it records each request and
// passes it on to the embedded model.
type recorder struct {
	next string // the embedded model's root, without /v1
	tok  *llm.Tokenizer
	hc   *http.Client

	// outputs holds the digests of every scripted tool output: a tool
	// message sent with another content had its output folded.
	outputs map[string]bool

	mu  sync.Mutex
	got map[string]sent // by X-Request-Id
}

// wireMessage is an OpenAI chat message as the recorder reads it.
type wireMessage struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Messages []wireMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s := sent{arrived: now}
	msgs := make([]llm.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = llm.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	s.tokens = rec.tok.CountMessages(msgs)
	if len(msgs) > 2 && msgs[2].Role == "user" {
		s.summary = rec.tok.CountMessage(msgs[2]) // system, task, summary
	}
	s.badPairs = unpaired(msgs)
	for _, m := range msgs {
		if m.Role == "tool" && !rec.outputs[digest(m.Content)] {
			s.folded++
		}
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "tool" {
		s.lastOK = digest(msgs[n-1].Content) == r.Header.Get("X-Bench-Last")
	}
	rec.mu.Lock()
	rec.got[r.Header.Get("X-Request-Id")] = s
	rec.mu.Unlock()
	resp, err := rec.hc.Post(rec.next+r.URL.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// unpaired counts the tool calls without their result before the next
// assistant message and the results that answer no call before them.
func unpaired(msgs []llm.Message) int {
	bad := 0
	open := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			bad += len(open)
			clear(open)
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				bad++
			}
			delete(open, m.ToolCallID)
		}
	}
	return bad + len(open)
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// request is one request as the client saw it.
type request struct {
	id         string
	start      time.Time
	took       time.Duration
	compressed bool
}

// compactionResult is one run's figures.
type compactionResult struct {
	requests                   []request
	got                        map[string]sent
	summaries, calls           float64
	waitedMetric, bypassMetric float64
	summarySeconds             float64
	// waited holds the requests serve logged as having waited; untimed
	// counts those that waited before any summary had been timed.
	waited                     map[string]bool
	untimed                    int
	longestWait                time.Duration
	hasBypass                  bool
	held                       time.Duration
	compactedTokens, allTokens []float64
	badPairs, lastNotVerbatim  int
	folded, foldedRequests     int
	// truncated counts the requests serve logged as sent with turns left
	// out.
	truncated int
	elapsed   time.Duration
}

func compactionRun(o options, c compactionOptions, b binary, summarizerLatency time.Duration, registry string, convs [][]turn) (*compactionResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	summarizer, err := embedded.Start(ctx, "", embedded.Config{Latency: summarizerLatency})
	if err != nil {
		return nil, err
	}
	defer summarizer.Close()
	model, err := embedded.Start(ctx, "", embedded.Config{Latency: c.turnLatency})
	if err != nil {
		return nil, err
	}
	defer model.Close()
	tok, err := llm.NewTokenizer(llm.DefaultEncoding)
	if err != nil {
		return nil, err
	}
	rec := &recorder{next: strings.TrimSuffix(model.URL(), "/v1"), tok: tok, hc: client(c.conversations), got: map[string]sent{}, outputs: map[string]bool{}}
	for _, turns := range convs {
		for _, t := range turns {
			var r struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(t.result, &r)
			rec.outputs[digest(r.Content)] = true
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	// serve logs each compressed request and whether it waited for its
	// summary (both builds do), which tells a wait from a slow machine.
	var logs bytes.Buffer
	srv, url, err := startServe(o, c, b, &logs, "http://"+ln.Addr().String()+"/v1", summarizer.URL(), registry)
	if err != nil {
		return nil, err
	}
	res := &compactionResult{held: c.held}
	t0 := time.Now()
	res.requests, err = converse(url, b.name, convs)
	res.elapsed = time.Since(t0)
	m := scrape(url)
	srv.stop()
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	res.got = rec.got
	rec.mu.Unlock()
	res.calls = float64(summarizer.Stats().Requests)
	res.read(m, logs.String())
	return res, nil
}

// startServe starts build b's serve in front of upstream with summarizer
// as its teacher; its log goes to logs.
func startServe(o options, c compactionOptions, b binary, logs io.Writer, upstream, summarizer, registry string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	work, err := os.MkdirTemp("", "serve-compaction")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(work) // serve reads its config at start
	cfg := filepath.Join(work, "serve.yaml")
	yaml := fmt.Sprintf("listen: %s\nupstream:\n  openai:\n    base_url: %s\ncompression:\n  registry: %s\n  threshold: %d\n  trigger: 0.8\ncompressor:\n  teacher:\n    base_url: %s\n    model: ctxopt-sim\n    timeout: 60s\nauth:\n  anonymous: true\n",
		addr, upstream, registry, c.threshold, summarizer)
	if b.name == "serve" {
		yaml = strings.Replace(yaml, "  trigger: 0.8\n", "  trigger: 0.8\n"+c.compressionYAML(), 1)
		yaml = strings.Replace(yaml, "    timeout: 60s\n", "    timeout: 60s\n"+c.linkYAML(), 1)
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return nil, "", err
	}
	srv, err := spawnTo(logs, b.name, []string{"GOMAXPROCS=" + strconv.Itoa(o.procs)}, b.path, "--log-level", "info", "serve", "--config", cfg)
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	if err := waitHTTP(url + "/readyz"); err != nil {
		srv.stop()
		return nil, "", err
	}
	return srv, url, nil
}

// compressionYAML and linkYAML are this build's settings the flags name,
// as lines of serve's config.
func (c compactionOptions) compressionYAML() string {
	var b strings.Builder
	if c.maxWait != "" {
		b.WriteString("  max_wait: " + c.maxWait + "\n")
	}
	if c.keepTokens != 0 {
		fmt.Fprintf(&b, "  keep_tokens: %d\n", c.keepTokens)
	}
	return b.String()
}

func (c compactionOptions) linkYAML() string {
	var b strings.Builder
	if c.linkLatency != "" {
		b.WriteString("    latency: " + c.linkLatency + "\n")
	}
	if c.linkConcurrency > 0 {
		fmt.Fprintf(&b, "    concurrency: %d\n", c.linkConcurrency)
	}
	return b.String()
}

// settings says what this build runs with.
func (c compactionOptions) settings() string {
	s := strings.Join(strings.Fields(c.compressionYAML()+c.linkYAML()), " ")
	if s == "" {
		return "its defaults"
	}
	return s + " (the link's: teacher)"
}

// read takes serve's counters from its metrics m and its waits from its
// log.
func (res *compactionResult) read(m map[string]float64, log string) {
	for name, v := range m {
		if strings.HasPrefix(name, "ctxopt_serve_compressions_total{") {
			res.summaries += v
		}
	}
	if n := m[`ctxopt_serve_compressor_duration_seconds_count{link="teacher"}`]; n > 0 {
		res.summarySeconds = m[`ctxopt_serve_compressor_duration_seconds_sum{link="teacher"}`] / n
	}
	res.waitedMetric, res.hasBypass = m["ctxopt_serve_summary_waited_total"]
	res.bypassMetric = m["ctxopt_serve_summary_bypassed_total"]
	res.waited = map[string]bool{}
	for _, w := range waitedLine.FindAllStringSubmatch(log, -1) {
		res.waited[w[1]] = true
	}
	res.untimed = len(untimedLine.FindAllString(log, -1))
	for _, d := range droppedLine.FindAllStringSubmatch(log, -1) {
		if d[1] != "0" {
			res.truncated++
		}
	}
	for _, w := range waitTook.FindAllStringSubmatch(log, -1) {
		if d, err := time.ParseDuration(w[1]); err == nil {
			res.longestWait = max(res.longestWait, d)
		}
	}
}

// converse runs the conversations at once, each turn after the answer to
// the last, and returns every request.
func converse(url, tag string, convs [][]turn) ([]request, error) {
	hc := client(len(convs))
	var mu sync.Mutex
	var out []request
	var firstErr error
	var wg sync.WaitGroup
	for ci, turns := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := []json.RawMessage{
				json.RawMessage(`{"role":"system","content":"You answer questions by searching."}`),
				json.RawMessage(fmt.Sprintf(`{"role":"user","content":"Answer: Q1: What is the river of Ostrel%d-0?"}`, ci)),
			}
			for ti, t := range turns {
				msgs = append(msgs, t.call, t.result)
				var last struct {
					Content string `json:"content"`
				}
				_ = json.Unmarshal(t.result, &last)
				body, _ := json.Marshal(map[string]any{"model": embedded.ModelName, "messages": msgs, "tools": json.RawMessage(benchTools)})
				r := request{id: fmt.Sprintf("%s-%d-%d", tag, ci, ti), start: time.Now()}
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Request-Id", r.id)
				req.Header.Set("X-Bench-Last", digest(last.Content))
				resp, err := hc.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				r.took = time.Since(r.start)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", r.id, err)
				}
				if err == nil {
					r.compressed = resp.Header.Get("X-Ctxopt-Compressed") == "true"
					out = append(out, r)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

var (
	// waitedLine is serve's log line of a request that waited for a
	// summary.
	waitedLine = regexp.MustCompile(`msg=compressed request_id=(\S+) .*waited=true`)
	// untimedLine is this build's line of a wait for a summary before any
	// had been timed (a fresh server: nothing to expect yet).
	untimedLine = regexp.MustCompile(`msg="waited for a summary" .* estimate=0s`)
	// droppedLine is serve's line of a request sent without the summary it
	// needed, with the messages it left out.
	droppedLine = regexp.MustCompile(`msg="summary not ready.*dropped_messages=(\d+)`)
	// waitTook is how long serve itself timed a wait.
	waitTook = regexp.MustCompile(`msg="waited for a summary" .*took=(\S+)`)
)

const benchTools = `[{"type":"function","function":{"name":"search","description":"search the corpus","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}]`

// scrape reads every series of serve's /metrics.
func scrape(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func (r *compactionResult) print(name string, summarizer time.Duration) {
	var holds, waits, summaries []float64
	slow := 0
	var worst time.Duration
	for _, q := range r.requests {
		s, ok := r.got[q.id]
		if !ok {
			continue
		}
		hold := s.arrived.Sub(q.start)
		worst = max(worst, hold)
		holds = append(holds, float64(hold))
		if r.waited[q.id] {
			waits = append(waits, float64(hold))
		}
		if hold > r.held {
			slow++
		}
		r.allTokens = append(r.allTokens, float64(s.tokens))
		if q.compressed {
			r.compactedTokens = append(r.compactedTokens, float64(s.tokens))
		}
		if s.summary > 0 {
			summaries = append(summaries, float64(s.summary))
		}
		r.badPairs += s.badPairs
		r.folded += s.folded
		if s.folded > 0 {
			r.foldedRequests++
		}
		if !s.lastOK {
			r.lastNotVerbatim++
		}
	}
	share := 0.0
	if r.summaries > 0 {
		share = float64(len(waits)) / r.summaries
	}
	wait := "no request waited"
	if len(waits) > 0 {
		slices.Sort(waits)
		wait = fmt.Sprintf("wait p50 %s p99 %s", ms(time.Duration(median(waits))), ms(time.Duration(waits[len(waits)*99/100])))
	}
	counters, untimed := "serve's counters: none (a build without them)", ""
	if r.hasBypass {
		untimed = fmt.Sprintf(", %d of them before any summary had been timed", r.untimed)
	}
	if r.hasBypass {
		counters = fmt.Sprintf("serve's counters: waited %.0f, bypassed (folded or truncated) %.0f; longest wait as serve timed it %s", r.waitedMetric, r.bypassMetric, ms(r.longestWait))
	}
	var total float64
	for _, t := range r.allTokens {
		total += t
	}
	fmt.Printf("compaction %s, summarizer %s: %d requests in %s; summaries %.0f, summarizer calls %.0f; requests that waited for a summary (serve's log): %d = %.1f%% of summaries%s (%s); held > %s for any reason: %d, longest hold %s, median %s; %s\n",
		name, summarizer, len(r.requests), r.elapsed.Round(100*time.Millisecond), r.summaries, r.calls, len(waits), 100*share, untimed, wait, r.held, slow, ms(worst), ms(time.Duration(median(holds))), counters)
	fmt.Printf("compaction %s, summarizer %s: upstream tokens per compacted turn median %.0f over %d compacted turns (summary message median %.0f tokens); %.2f M tokens upstream in all; unpaired tool messages %d; last tool result not verbatim in %d requests; tool outputs folded %d in %d requests; requests sent with turns left out (serve's log) %d; a summarizer call took %.2f s on average as serve saw it\n",
		name, summarizer, median(r.compactedTokens), len(r.compactedTokens), median(summaries), total/1e6, r.badPairs, r.lastNotVerbatim, r.folded, r.foldedRequests, r.truncated, r.summarySeconds)
}
