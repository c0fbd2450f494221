package env

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ctxopt/ctxopt/datasets"
	"github.com/ctxopt/ctxopt/internal/jsonl"
)

// QAOptions configure the qa environment.
type QAOptions struct {
	// Dir holds corpus.jsonl, train.jsonl and test.jsonl (and optionally
	// VERSION); "" uses the dataset embedded in the binary.
	Dir string
	// TopK is the number of passages a search returns; 0 means 3.
	TopK int
	// QuestionsPerTask > 0 selects the long-horizon variant: each split's
	// questions regrouped into tasks of this many, answered one at a time
	// with the answer tool (qa_long.go).
	QuestionsPerTask int
	// SearchBudget > 0 caps the searches of an episode, as a metered search
	// API does: later searches get an error observation and reach no index.
	// Re-finding what the context lost then costs something, as it does in
	// a real environment (0: no cap).
	SearchBudget int
	// Limits bound each dataset file and line; zero fields take
	// DefaultLimits'.
	Limits jsonl.Limits
}

// DefaultLimits bound dataset files: a qa task line is ~1 KiB and a passage
// a few, so a 1 MiB line is a broken file, not data.
var DefaultLimits = jsonl.Limits{Line: 1 << 20, File: 1 << 30}

// QA is the 8-objective question answering environment of ACON (appendix
// D.1): the agent searches a BM25-indexed corpus and answers eight
// questions with one finish call, scored by SQuAD exact match and F1.
// It is safe for concurrent use.
type QA struct {
	data  *qaData // shared with every QA of the same files (loadQA)
	tasks map[string][]Task
	topK  int
	// long is the long-horizon variant, with the answer tool, of
	// questionsPerTask questions per task.
	long             bool
	questionsPerTask int
	// searchBudget caps the searches of an episode (0: no cap).
	searchBudget int
}

var (
	_ Environment = (*QA)(nil)
	_ Configured  = (*QA)(nil)
)

// NewQA loads and validates the dataset; its corpus is indexed on the first
// search.
func NewQA(opts QAOptions) (*QA, error) {
	if opts.TopK < 0 || opts.QuestionsPerTask < 0 || opts.SearchBudget < 0 {
		return nil, fmt.Errorf("qa: top_k, questions_per_task and search_budget must not be negative, got %d, %d and %d", opts.TopK, opts.QuestionsPerTask, opts.SearchBudget)
	}
	lim := opts.Limits
	if lim.Line == 0 {
		lim.Line = DefaultLimits.Line
	}
	if lim.File == 0 {
		lim.File = DefaultLimits.File
	}
	d := dataset{fsys: datasets.QA(), display: func(name string) string { return "datasets/qa/" + name }, limits: lim, sum: sha256.New()}
	if opts.Dir != "" {
		d = dataset{fsys: os.DirFS(opts.Dir), display: func(name string) string { return filepath.Join(opts.Dir, name) }, limits: lim, sum: sha256.New()}
	}
	data, err := loadQA(d)
	if err != nil {
		return nil, err
	}
	q := &QA{data: data, tasks: map[string][]Task{}, topK: opts.TopK, searchBudget: opts.SearchBudget, questionsPerTask: opts.QuestionsPerTask}
	if q.topK == 0 {
		q.topK = 3
	}
	for split, ts := range data.tasks {
		q.tasks[split] = ts
		if n := opts.QuestionsPerTask; n > 0 {
			q.tasks[split] = regroup(ts, split, n)
			q.long = true
		}
	}
	return q, nil
}

// load reads and checks the dataset's files.
func (d dataset) load() (*qaData, error) {
	data := &qaData{tasks: map[string][]Task{}}
	var err error
	if data.passages, err = d.loadCorpus(); err != nil {
		return nil, err
	}
	ids, questions := map[string]string{}, map[string]string{}
	for _, split := range []string{"train", "test"} {
		if data.tasks[split], err = d.loadTasks(split, ids, questions); err != nil {
			return nil, err
		}
	}
	switch v, err := fs.ReadFile(d.fsys, "VERSION"); {
	case err == nil:
		data.version = strings.TrimSpace(string(v))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read dataset %s: %w", d.display("VERSION"), err)
	}
	data.content = d.digest()
	return data, nil
}

// Settings names the dataset (version and content) and the options that
// change what a task is or how it is answered: top_k, questions_per_task
// and search_budget. Line and file limits only reject broken files.
func (q *QA) Settings() string {
	return fmt.Sprintf("qa dataset=%s content=%s top_k=%d questions_per_task=%d search_budget=%d", q.data.version, q.data.content, q.topK, q.questionsPerTask, q.searchBudget)
}

// searchIndex returns the BM25 index of the corpus (qaData.searchIndex).
func (q *QA) searchIndex() *bm25 { return q.data.searchIndex() }

// Name is "qa".
func (q *QA) Name() string { return "qa" }

// Version is the dataset's VERSION line, "" when it has none.
func (q *QA) Version() string { return q.data.version }

// Tools are search and finish, and answer in the long-horizon variant.
func (q *QA) Tools() []ToolSpec {
	search := fmt.Sprintf("Search the knowledge base; returns the %d most relevant passages.", q.topK)
	if q.searchBudget > 0 {
		search += fmt.Sprintf(" At most %d searches per task.", q.searchBudget)
	}
	ts := []ToolSpec{
		{
			Name:        "search",
			Description: search,
			Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"The search query."}},"required":["query"]}`),
		},
		{
			Name:        "finish",
			Description: "Submit the final answers, one per question in question order, and end the task.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"answers":{"type":"array","items":{"type":"string"},"description":"One short answer per question, in order."}},"required":["answers"]}`),
		},
	}
	if q.long {
		ts = append(ts, answerTool)
	}
	return ts
}

// Tasks returns the tasks of split "train" or "test".
func (q *QA) Tasks(split string) ([]Task, error) {
	ts, ok := q.tasks[split]
	if !ok {
		return nil, fmt.Errorf("qa: unknown split %q; want train or test", split)
	}
	// Deep copies: callers may edit their tasks without touching the gold.
	out := make([]Task, len(ts))
	for i, t := range ts {
		qs := make([]Question, len(t.Questions))
		for j, q := range t.Questions {
			qs[j] = Question{Text: q.Text, Answers: append([]string(nil), q.Answers...)}
		}
		t.Questions = qs
		out[i] = t
	}
	return out, nil
}

// Reset starts an episode on task, scored against task.Questions.
func (q *QA) Reset(ctx context.Context, task Task) (Episode, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(task.Questions) == 0 {
		return nil, fmt.Errorf("qa: task %q has no questions", task.ID)
	}
	return &qaEpisode{env: q, questions: task.Questions}, nil
}

// search renders the top passages for query in the observation format of
// docs/embedded-model.md.
func (q *QA) search(query string) string {
	hits := q.searchIndex().search(query, q.topK)
	if len(hits) == 0 {
		return "No passages match the search " + strconv.Quote(query) + "."
	}
	var b strings.Builder
	for i, h := range hits {
		p := q.data.passages[h.doc]
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[%d] (doc %s) %s\n%s", i+1, p.ID, p.Title, p.Text)
	}
	return b.String()
}

// SearchBudgetSpent opens the error observation of a search beyond the
// episode's search budget (QAOptions.SearchBudget).
const SearchBudgetSpent = "the search budget of this task is spent"

type qaEpisode struct {
	env       *QA
	questions []Question

	mu    sync.Mutex
	done  bool
	score Score
	// answers and given hold the answer tool's answers (long variant).
	answers []string
	given   []bool
	// searches counts the searches that reached the index.
	searches int
}

// Step runs a search or finishes. Bad input is the agent's mistake, so it is
// answered with an "error:" observation and the episode goes on; only a
// step after the end is a Go error.
func (e *qaEpisode) Step(ctx context.Context, a Action) (StepResult, error) {
	if err := ctx.Err(); err != nil {
		return StepResult{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return StepResult{}, errors.New("qa: step after the episode finished")
	}
	switch a.Tool {
	case "search":
		query, msg := searchArgs(a.Arguments)
		if msg != "" {
			return StepResult{Observation: "error: " + msg}, nil
		}
		if b := e.env.searchBudget; b > 0 && e.searches >= b {
			return StepResult{Observation: fmt.Sprintf("error: %s (%d searches); answer from what you have found.", SearchBudgetSpent, b)}, nil
		}
		e.searches++
		return StepResult{Observation: e.env.search(query)}, nil
	case "finish":
		answers, msg := finishArgs(a.Arguments)
		if msg != "" {
			return StepResult{Observation: "error: " + msg}, nil
		}
		e.done, e.score = true, scoreAnswers(e.questions, e.merged(answers))
		s := e.score
		return StepResult{Observation: fmt.Sprintf("Submitted %d answers for %d questions.", len(answers), len(e.questions)), Done: true, Score: &s}, nil
	case "answer":
		if e.env.long {
			return StepResult{Observation: e.answer(a.Arguments)}, nil
		}
		fallthrough
	default:
		return StepResult{Observation: fmt.Sprintf("error: unknown tool %q; the tools are search and finish", a.Tool)}, nil
	}
}

// Finish ends the episode; without a finish action every answer is empty.
func (e *qaEpisode) Finish(context.Context) Score {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		e.done, e.score = true, scoreAnswers(e.questions, e.merged(nil))
	}
	return e.score
}

// objectArgs parses tool arguments as a JSON object; msg explains a failure.
func objectArgs(tool, usage string, raw json.RawMessage) (args map[string]json.RawMessage, msg string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Sprintf("%s got no arguments; call it with %s", tool, usage)
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, fmt.Sprintf("%s arguments are not a JSON object (%v); call it with %s", tool, err, usage)
	}
	return args, ""
}

const (
	searchUsage = `{"query": "your search terms"}`
	finishUsage = `{"answers": ["answer 1", "answer 2", ...]}`
)

func searchArgs(raw json.RawMessage) (string, string) {
	args, msg := objectArgs("search", searchUsage, raw)
	if msg != "" {
		return "", msg
	}
	v, ok := args["query"]
	if !ok {
		return "", `search needs the field "query"; call it with ` + searchUsage
	}
	var query string
	if err := json.Unmarshal(v, &query); err != nil {
		return "", fmt.Sprintf(`search field "query" must be a string, got %s`, v)
	}
	if strings.TrimSpace(query) == "" {
		return "", `search field "query" is empty`
	}
	return query, ""
}

// finishArgs accepts strings and, since models often write years bare,
// numbers (as written).
func finishArgs(raw json.RawMessage) ([]string, string) {
	args, msg := objectArgs("finish", finishUsage, raw)
	if msg != "" {
		return nil, msg
	}
	v, ok := args["answers"]
	if !ok {
		return nil, `finish needs the field "answers"; call it with ` + finishUsage
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil || items == nil {
		return nil, fmt.Sprintf(`finish field "answers" must be an array of strings, got %s`, v)
	}
	answers := make([]string, len(items))
	for i, it := range items {
		var n json.Number
		switch {
		case json.Unmarshal(it, &answers[i]) == nil:
		case json.Unmarshal(it, &n) == nil:
			answers[i] = n.String()
		default:
			return nil, fmt.Sprintf(`finish field "answers" must hold strings; item %d is %s`, i+1, it)
		}
	}
	return answers, ""
}
