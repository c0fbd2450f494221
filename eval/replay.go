package eval

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/templates"
)

// MetricAgreement is the share of replayed production requests on which
// the agent's next turn with the candidate's compressed history agrees
// with its next turn with the full history (Replay). Only evaluations
// given session logs have it.
const MetricAgreement = "agreement"

// ReplayFile holds one line per candidate and replayed request.
const ReplayFile = "replay.jsonl"

// DefaultReplaySample is how many logged requests a replay samples when
// the caller gives no count: enough for an interval of about ±0.1 on an
// agreement near 0.8, cheap enough for a nightly job (two agent calls and
// at most one compression per request and candidate).
const DefaultReplaySample = 50

// replayStrata is how many session-length groups sampling draws from
// equally, so long sessions, where compression matters, are not outweighed
// by the many short ones.
const replayStrata = 3

// How agreement was scored (ReplayOutcome.How).
const (
	AgreeTool  = "tool"  // same tool, equal arguments as canonical JSON
	AgreeJudge = "judge" // free text, the judge role said tie
	AgreeExact = "exact" // free text, no judge: equal after normalisation
)

// ReplayRequest is one logged agent request: the history of a session
// after Step turns, whose next turn is asked for again.
type ReplayRequest struct {
	ID      string        `json:"id"`
	Session string        `json:"session"`
	Step    int           `json:"step"`
	Turns   int           `json:"session_turns"`
	Task    string        `json:"-"`
	History []llm.Message `json:"-"`
}

// ReplayOutcome is one candidate's agreement on one request.
type ReplayOutcome struct {
	Candidate string  `json:"candidate"`
	Request   string  `json:"request"`
	Agreement float64 `json:"agreement"`
	How       string  `json:"how"`
	// Compressed is false when the candidate left the history as it was
	// (below its threshold, or a candidate that compresses nothing).
	Compressed bool   `json:"compressed"`
	Full       string `json:"full_reply"`
	Reply      string `json:"reply"`
}

// Replay configures the replay part of an evaluation (Options.Replay).
type Replay struct {
	// Sessions is the session log (a trajectories.jsonl of serve, or of an
	// import); Requests are those sampled from it (SampleReplay).
	Sessions string
	Requests []ReplayRequest
	// System is the agent's system prompt: session logs do not keep the
	// client's, so the job's agent prompt stands in for it.
	System string
	// Judge scores free-text replies; nil compares them after
	// normalisation (case, spacing and punctuation ignored).
	Judge rollout.Completer
}

// SampleReplay draws n requests from the session log at path, seeded:
// sessions are split by length (turns) into equal-count groups, each group
// gives an equal share of the n (what a small group cannot give goes to
// the others), and within a group (session, step) pairs are drawn without
// replacement. Two passes over the log; only the sampled sessions'
// histories are kept in memory.
func SampleReplay(path string, n int, seed uint64) ([]ReplayRequest, error) {
	type sess struct {
		id    string
		turns int
	}
	var all []sess
	for t, err := range rollout.Records(path) {
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if len(t.Turns) > 0 {
			all = append(all, sess{t.TaskID, len(t.Turns)})
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("replay: %s holds no session with a logged turn", path)
	}
	slices.SortStableFunc(all, func(a, b sess) int { return cmp.Or(cmp.Compare(a.turns, b.turns), strings.Compare(a.id, b.id)) })
	var strata [][]ReplayRequest
	for g := range replayStrata {
		var reqs []ReplayRequest
		for _, s := range all[g*len(all)/replayStrata : (g+1)*len(all)/replayStrata] {
			for k := 1; k <= s.turns; k++ {
				reqs = append(reqs, ReplayRequest{ID: fmt.Sprintf("%s#%d", s.id, k), Session: s.id, Step: k, Turns: s.turns})
			}
		}
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		strata = append(strata, reqs)
	}
	picked := allocate(strata, n)
	slices.SortFunc(picked, func(a, b ReplayRequest) int { return strings.Compare(a.ID, b.ID) })
	return picked, fillHistories(path, picked)
}

// allocate takes up to n requests from the strata, as evenly as they
// allow.
func allocate(strata [][]ReplayRequest, n int) []ReplayRequest {
	var out []ReplayRequest
	taken := make([]int, len(strata))
	for len(out) < n {
		progress := false
		for g, s := range strata {
			if taken[g] < len(s) && len(out) < n {
				out = append(out, s[taken[g]])
				taken[g]++
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return out
}

// fillHistories reads the sampled sessions' tasks and histories.
func fillHistories(path string, reqs []ReplayRequest) error {
	want := map[string][]int{}
	for i, r := range reqs {
		want[r.Session] = append(want[r.Session], i)
	}
	for t, err := range rollout.Records(path) {
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		idx, ok := want[t.TaskID]
		if !ok {
			continue
		}
		delete(want, t.TaskID) // a session id logged twice: the first record
		hist := HistoryOf(t.Turns)
		for _, i := range idx {
			reqs[i].Task = t.Task
			reqs[i].History = hist[:turnEnd(hist, reqs[i].Step)]
		}
	}
	return nil
}

// HistoryOf rebuilds the messages after the task message from logged
// turns: each assistant message, then what answered it (a tool result per
// tool call, the observation in the first; a user message when it called
// no tool).
func HistoryOf(turns []rollout.Turn) []llm.Message {
	var out []llm.Message
	for _, tu := range turns {
		out = append(out, tu.Output)
		obs := tu.Observation
		if tu.CompressedObservation != "" {
			obs = tu.CompressedObservation
		}
		if len(tu.Output.ToolCalls) == 0 {
			out = append(out, llm.Message{Role: "user", Content: obs})
			continue
		}
		for i, c := range tu.Output.ToolCalls {
			m := llm.Message{Role: "tool", ToolCallID: c.ID, Name: c.Name}
			if i == 0 {
				m.Content = obs
			}
			out = append(out, m)
		}
	}
	return out
}

// turnEnd is the index in hist just past its k-th turn, by the one turn
// cut (compress.TurnStarts).
func turnEnd(hist []llm.Message, k int) int {
	starts := compress.TurnStarts(len(hist), func(i int) string { return hist[i].Role })
	if k < len(starts) {
		return starts[k]
	}
	return len(hist)
}

// replayer asks one candidate's agent for the next turns of the requests.
type replayer struct {
	rp    *Replay
	agent *rollout.Agent
	tools []llm.Tool
}

func newReplayer(rp *Replay, a *rollout.Agent) replayer {
	var tools []llm.Tool
	for _, s := range a.Env.Tools() {
		tools = append(tools, llm.Tool{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	return replayer{rp: rp, agent: a, tools: tools}
}

// ask sends the agent the system prompt and msgs (task message first).
func (r replayer) ask(ctx context.Context, msgs []llm.Message) (llm.Message, error) {
	all := append([]llm.Message{{Role: "system", Content: r.rp.System}}, msgs...)
	resp, err := r.agent.Model.Complete(ctx, llm.Request{Purpose: llm.PurposeAgent, Messages: all, Tools: r.tools})
	if err != nil {
		return llm.Message{}, fmt.Errorf("replay agent call: %w", err)
	}
	return resp.Message, nil
}

// full is the agent's next turn with the whole history.
func (r replayer) full(ctx context.Context, q ReplayRequest) (llm.Message, error) {
	return r.ask(ctx, append([]llm.Message{{Role: "user", Content: q.Task}}, q.History...))
}

// compressed is the agent's next turn with the history as the candidate's
// strategy compresses it (from no earlier summary), and whether it changed
// anything.
func (r replayer) compressed(ctx context.Context, q ReplayRequest) (llm.Message, bool, error) {
	task := llm.Message{Role: "user", Content: q.Task}
	msgs := append([]llm.Message{task}, q.History...)
	s := r.agent.Strategy
	if s == nil || s.History == nil {
		m, err := r.ask(ctx, msgs)
		return m, false, err
	}
	c := rollout.NewCounter(r.agent.Tokenizer)
	for _, m := range msgs {
		c.Add(m)
	}
	out, err := s.History.CompressHistory(ctx, compress.Input{
		Step: q.Step, MaxSteps: r.agent.StepLimit, Task: q.Task, History: q.History,
		ContextTokens: c.Total(), Window: r.agent.Window,
	})
	if err != nil {
		return llm.Message{}, false, fmt.Errorf("replay compress %s: %w", q.ID, err)
	}
	m, err := r.ask(ctx, out.Messages)
	return m, out.Event != nil, err
}

// runReplay scores every candidate on every request. The full-history
// reply is the same request for every candidate (the response cache
// answers it once).
func runReplay(ctx context.Context, rp *Replay, cands []Candidate) ([]ReplayOutcome, error) {
	var outs []ReplayOutcome
	for _, c := range cands {
		r := newReplayer(rp, c.Agent)
		for i, q := range rp.Requests {
			if i == len(rp.Requests)/2 {
				killpoint.Reach("replay")
			}
			o, err := r.score(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("candidate %s: %w", c.Spec.Name, err)
			}
			o.Candidate = c.Spec.Name
			outs = append(outs, o)
		}
	}
	return outs, nil
}

func (r replayer) score(ctx context.Context, q ReplayRequest) (ReplayOutcome, error) {
	full, err := r.full(ctx, q)
	if err != nil {
		return ReplayOutcome{}, err
	}
	got, changed, err := r.compressed(ctx, q)
	if err != nil {
		return ReplayOutcome{}, err
	}
	o := ReplayOutcome{Request: q.ID, Compressed: changed, Full: replyText(full), Reply: replyText(got)}
	o.Agreement, o.How, err = agree(ctx, r.rp.Judge, q, full, got)
	return o, err
}

// agree scores two replies to the same request: tool calls agree when the
// first call's tool and arguments (canonical JSON) are equal; free text is
// judged, or compared after normalisation when there is no judge. A tool
// call and free text never agree.
func agree(ctx context.Context, judge rollout.Completer, q ReplayRequest, a, b llm.Message) (float64, string, error) {
	ta, tb := len(a.ToolCalls) > 0, len(b.ToolCalls) > 0
	switch {
	case ta || tb:
		ok := ta && tb && a.ToolCalls[0].Name == b.ToolCalls[0].Name &&
			canonical(a.ToolCalls[0].Arguments) == canonical(b.ToolCalls[0].Arguments)
		return b2f(ok), AgreeTool, nil
	case judge == nil:
		return b2f(normalize(a.Content) == normalize(b.Content)), AgreeExact, nil
	}
	tie, err := judgeTie(ctx, judge, q.Task, a.Content, b.Content)
	return b2f(tie), AgreeJudge, err
}

// judgeTie asks the judge whether two free-text replies are equally good
// (replay_judge.tmpl; the reply JSON's winner is "tie").
func judgeTie(ctx context.Context, judge rollout.Completer, task, a, b string) (bool, error) {
	prompt, err := templates.Render("replay_judge.tmpl", map[string]any{"task": task, "output_a": a, "output_b": b})
	if err != nil {
		return false, err
	}
	resp, err := judge.Complete(ctx, llm.Request{Purpose: llm.PurposeJudge, Messages: []llm.Message{{Role: "user", Content: prompt}}})
	if err != nil {
		return false, fmt.Errorf("replay judge: %w", err)
	}
	var v struct {
		Winner string `json:"winner"`
	}
	s := strings.TrimSpace(resp.Message.Content)
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "```json"), "```"), "```")
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &v); err != nil {
		return false, nil // an unreadable verdict does not vouch for agreement
	}
	return strings.EqualFold(strings.TrimSpace(v.Winner), "tie"), nil
}

// canonical re-encodes JSON arguments with sorted keys and no spacing;
// invalid JSON stays as written.
func canonical(args string) string {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return args
	}
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return args
	}
	return string(b)
}

// normalize lower-cases s, drops punctuation and collapses spacing.
func normalize(s string) string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	return strings.Join(f, " ")
}

func replyText(m llm.Message) string {
	if len(m.ToolCalls) > 0 {
		return m.ToolCalls[0].Name + canonical(m.ToolCalls[0].Arguments)
	}
	return m.Content
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// replayPath is the replay file of an evaluation directory.
func replayPath(dir string) string { return filepath.Join(dir, ReplayFile) }

func writeReplay(dir string, outs []ReplayOutcome) error {
	var b strings.Builder
	for _, o := range outs {
		line, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode replay outcome: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return atomicfile.WriteFile(replayPath(dir), []byte(b.String()), 0o644)
}

func readReplay(dir string) ([]ReplayOutcome, error) {
	b, err := os.ReadFile(replayPath(dir))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ReplayFile, err)
	}
	var outs []ReplayOutcome
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var o ReplayOutcome
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", replayPath(dir), n+1, err)
		}
		outs = append(outs, o)
	}
	return outs, nil
}
