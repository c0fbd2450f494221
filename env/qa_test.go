package env

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
)

var embedded = sync.OnceValues(func() (*QA, error) { return NewQA(QAOptions{}) })

// loadEmbedded returns the qa environment on the embedded dataset, loaded
// once for the package's tests.
func loadEmbedded(t testing.TB) *QA {
	t.Helper()
	q, err := embedded()
	if err != nil {
		t.Fatalf("NewQA: %v", err)
	}
	return q
}

var questionRE = regexp.MustCompile(`^What is the ([a-z]+(?: [a-z]+)*) of ([A-Z][a-z]+(?: [A-Z][a-z]+)?)\?$`)

// parseQuestion splits a contract question into relation and entity.
func parseQuestion(t *testing.T, q string) (rel, entity string) {
	t.Helper()
	m := questionRE.FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("question %q is not of the form `What is the <relation> of <entity>?`", q)
	}
	return m[1], m[2]
}

func TestQAEmbedded(t *testing.T) {
	q := loadEmbedded(t)
	if q.Name() != "qa" || q.topK != 3 {
		t.Errorf("name %q, top k %d; want qa, 3", q.Name(), q.topK)
	}
	if !strings.HasPrefix(q.Version(), "1.0.0+seed42") {
		t.Errorf("Version() = %q, want the embedded VERSION", q.Version())
	}
	for _, split := range []string{"train", "test"} {
		ts, err := q.Tasks(split)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 100 {
			t.Errorf("%s: %d tasks, want 100", split, len(ts))
		}
		for _, task := range ts {
			lines := strings.Split(task.Prompt, "\n")
			if task.Split != split || len(task.Questions) != 8 || len(lines) != 8 {
				t.Fatalf("task %s: split %q, %d questions, %d prompt lines", task.ID, task.Split, len(task.Questions), len(lines))
			}
			for i, l := range lines {
				if want := "Q" + string(rune('1'+i)) + ": " + task.Questions[i].Text; l != want {
					t.Fatalf("task %s prompt line %d = %q, want %q", task.ID, i+1, l, want)
				}
				parseQuestion(t, task.Questions[i].Text)
			}
		}
	}
	if _, err := q.Tasks("dev"); err == nil || !strings.Contains(err.Error(), `unknown split "dev"`) {
		t.Errorf("Tasks(dev) error = %v, want unknown split", err)
	}
	ts, _ := q.Tasks("train")
	ts[0].Questions[0].Text = "changed"
	ts[0].Questions[0].Answers[0] = "changed"
	if again, _ := q.Tasks("train"); again[0].Questions[0].Text == "changed" || again[0].Questions[0].Answers[0] == "changed" {
		t.Error("Tasks returns the environment's own slices; a caller's change leaked into it")
	}
}

// factIn reports whether text states the fact behind a question in any of
// the three contract forms.
func factIn(text, rel, entity string) bool {
	return strings.Contains(text, "The "+rel+" of "+entity+" is ") ||
		strings.Contains(text, entity+"'s "+rel+" is ") ||
		strings.Contains(text, " is listed in the archives of "+entity+" under "+rel+".")
}

// TestQARetrieval measures how often the passage stating a train question's
// fact is among the top 3 (and first) for the question's own text.
func TestQARetrieval(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	top3, first, total := 0, 0, 0
	for _, task := range ts {
		for _, qu := range task.Questions {
			rel, entity := parseQuestion(t, qu.Text)
			total++
			for i, h := range q.searchIndex().search(qu.Text, 3) {
				if factIn(q.data.passages[h.doc].Text, rel, entity) {
					top3++
					if i == 0 {
						first++
					}
					break
				}
			}
		}
	}
	rate := float64(top3) / float64(total)
	t.Logf("fact passage in top 3 for %d of %d train questions (%.1f%%), first for %d (%.1f%%)", top3, total, 100*rate, first, 100*float64(first)/float64(total))
	if rate < 0.95 {
		t.Errorf("fact passage in top 3 for %.1f%% of train questions, want at least 95%%", 100*rate)
	}
}

// TestQACorpusContract reads the corpus the way the embedded agent does
// (docs/embedded-model.md, "Agent" rule 3: case-insensitive, no word
// boundaries): every question must have exactly one readable fact sentence
// whose answer is the gold answer, unless its fact is in archive form
// (form 3), which the agent cannot read.
func TestQACorpusContract(t *testing.T) {
	q := loadEmbedded(t)
	var corpus strings.Builder
	for _, p := range q.data.passages {
		corpus.WriteString(strings.ToLower(p.Title + "\n" + p.Text + "\n"))
	}
	text := corpus.String()
	// Occurrences of each pattern's fixed part, found once per relation.
	occurrences := map[string][]int{}
	at := func(needle string) []int {
		if pos, ok := occurrences[needle]; ok {
			return pos
		}
		var pos []int
		for off := 0; ; {
			i := strings.Index(text[off:], needle)
			if i < 0 {
				break
			}
			pos = append(pos, off+i)
			off += i + 1
		}
		occurrences[needle] = pos
		return pos
	}
	answerAt := func(i int) string { return text[i : i+strings.IndexAny(text[i:], ".\n")] }
	archived := map[string]int{}
	for _, i := range at(" is listed in the archives of ") {
		start := max(strings.LastIndex(text[:i], ". ")+2, strings.LastIndex(text[:i], "\n")+1)
		archived[text[start:i+strings.IndexByte(text[i:], '.')+1]]++
	}
	for _, split := range []string{"train", "test"} {
		ts, _ := q.Tasks(split)
		withForm3 := 0
		for _, task := range ts {
			hasForm3 := false
			for _, qu := range task.Questions {
				rel, entity := parseQuestion(t, qu.Text)
				r, e := strings.ToLower(rel), strings.ToLower(entity)
				var answers []string
				form1 := "the " + r + " of "
				for _, i := range at(form1) {
					if rest := text[i+len(form1):]; strings.HasPrefix(rest, e+" is ") {
						answers = append(answers, answerAt(i+len(form1)+len(e)+4))
					}
				}
				form2 := "'s " + r + " is "
				for _, i := range at(form2) {
					if strings.HasSuffix(text[:i], e) {
						answers = append(answers, answerAt(i+len(form2)))
					}
				}
				form3 := archived[strings.ToLower(qu.Answers[0])+" is listed in the archives of "+e+" under "+r+"."]
				switch {
				case form3 == 1 && len(answers) == 0:
					hasForm3 = true
				case form3 == 0 && len(answers) == 1 && answers[0] == strings.ToLower(qu.Answers[0]):
				default:
					t.Errorf("%s %q: readable answers %q and %d archive sentences; want one readable %q or one archive sentence", task.ID, qu.Text, answers, form3, qu.Answers[0])
				}
			}
			if hasForm3 {
				withForm3++
			}
		}
		frac := float64(withForm3) / float64(len(ts))
		t.Logf("%s: %d of %d tasks (%.0f%%) hold an archive-form fact", split, withForm3, len(ts), 100*frac)
		if frac < 0.1 || frac > 0.35 {
			t.Errorf("%s: %.0f%% of tasks hold an archive-form fact, want about 20%%", split, 100*frac)
		}
	}
}

func TestQASearchObservation(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	question := ts[0].Questions[0].Text
	ep, err := q.Reset(t.Context(), ts[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := ep.Step(t.Context(), Action{Tool: "search", Arguments: mustJSON(t, map[string]string{"query": question})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || res.Score != nil {
		t.Errorf("search result done=%v score=%v, want neither", res.Done, res.Score)
	}
	// The contract: `[k] (doc ID) Title` then the text, blocks separated by a blank line.
	blocks := strings.Split(res.Observation, "\n\n")
	if len(blocks) != 3 {
		t.Fatalf("observation has %d blocks, want 3:\n%s", len(blocks), res.Observation)
	}
	header := regexp.MustCompile(`^\[(\d)\] \(doc d\d{5}\) [^\n]+\n[^\n]+$`)
	for i, b := range blocks {
		m := header.FindStringSubmatch(b)
		if m == nil || m[1] != string(rune('1'+i)) {
			t.Errorf("block %d does not match %s:\n%s", i+1, header, b)
		}
	}
	golden.Check(t, "search_observation.golden", "search: "+question+"\n\n"+res.Observation+"\n")
}

func TestQANoMatch(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	ep, _ := q.Reset(t.Context(), ts[0])
	res, err := ep.Step(t.Context(), Action{Tool: "search", Arguments: json.RawMessage(`{"query":"zzzqqq"}`)})
	if err != nil || res.Observation != `No passages match the search "zzzqqq".` {
		t.Errorf("search for an unknown word = %q, %v", res.Observation, err)
	}
}

func TestQABadActions(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	tests := []struct {
		name string
		a    Action
		want string
	}{
		{"unknown tool", Action{Tool: "browse", Arguments: json.RawMessage(`{}`)}, `error: unknown tool "browse"; the tools are search and finish`},
		{"truncated JSON", Action{Tool: "search", Arguments: json.RawMessage(`{"query": "What is the cap`)}, "error: search arguments are not a JSON object (unexpected end of JSON input)"},
		{"no arguments", Action{Tool: "search"}, "error: search got no arguments"},
		{"array arguments", Action{Tool: "search", Arguments: json.RawMessage(`["x"]`)}, "error: search arguments are not a JSON object"},
		{"missing query", Action{Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}, `error: search needs the field "query"`},
		{"query not a string", Action{Tool: "search", Arguments: json.RawMessage(`{"query":3}`)}, `error: search field "query" must be a string, got 3`},
		{"empty query", Action{Tool: "search", Arguments: json.RawMessage(`{"query":"  "}`)}, `error: search field "query" is empty`},
		{"missing answers", Action{Tool: "finish", Arguments: json.RawMessage(`{"answer":["x"]}`)}, `error: finish needs the field "answers"`},
		{"answers not an array", Action{Tool: "finish", Arguments: json.RawMessage(`{"answers":"x"}`)}, `error: finish field "answers" must be an array of strings, got "x"`},
		{"answers null", Action{Tool: "finish", Arguments: json.RawMessage(`{"answers":null}`)}, `error: finish field "answers" must be an array of strings, got null`},
		{"answer an object", Action{Tool: "finish", Arguments: json.RawMessage(`{"answers":["a",{"b":1}]}`)}, `error: finish field "answers" must hold strings; item 2 is {"b":1}`},
	}
	ep, err := q.Reset(t.Context(), ts[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One episode for all: each bad action must leave it usable.
			res, err := ep.Step(t.Context(), tt.a)
			if err != nil {
				t.Fatalf("Step: %v; bad input must be an observation", err)
			}
			if !strings.HasPrefix(res.Observation, tt.want) || res.Done {
				t.Errorf("observation %q (done %v), want prefix %q", res.Observation, res.Done, tt.want)
			}
		})
	}
	if _, err := ep.Step(t.Context(), Action{Tool: "search", Arguments: json.RawMessage(`{"query":"Veloria"}`)}); err != nil {
		t.Errorf("search after bad actions: %v", err)
	}
}

func TestQAFinish(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("test")
	task := ts[0]
	gold := make([]any, len(task.Questions))
	for i, qu := range task.Questions {
		gold[i] = qu.Answers[len(qu.Answers)-1] // an alias where there is one
	}
	tests := []struct {
		name    string
		answers []any
		success bool
		em      float64
	}{
		{"all right", gold, true, 1},
		{"half given", gold[:4], false, 0.5},
		{"one wrong", append(append([]any{}, gold[:7]...), "unknown"), false, 7.0 / 8},
		{"none", []any{}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, err := q.Reset(t.Context(), task)
			if err != nil {
				t.Fatal(err)
			}
			res, err := ep.Step(t.Context(), Action{Tool: "finish", Arguments: mustJSON(t, map[string]any{"answers": tt.answers})})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Done || res.Score == nil {
				t.Fatalf("finish: done=%v score=%v, want a score", res.Done, res.Score)
			}
			if res.Score.Success != tt.success || res.Score.EM != tt.em || len(res.Score.PerQuestion) != 8 {
				t.Errorf("score %+v, want success %v, EM %v, 8 per-question scores", *res.Score, tt.success, tt.em)
			}
			if _, err := ep.Step(t.Context(), Action{Tool: "search", Arguments: json.RawMessage(`{"query":"x"}`)}); err == nil {
				t.Error("Step after finish succeeded, want an error")
			}
			if s := ep.Finish(t.Context()); s.EM != tt.em {
				t.Errorf("Finish after finish = %+v, want the finish score", s)
			}
		})
	}
}

func TestQAFinishNumbers(t *testing.T) {
	q := loadEmbedded(t)
	task := Task{ID: "t", Questions: []Question{{Text: "What is the founding year of Veloria?", Answers: []string{"1187"}}}}
	ep, _ := q.Reset(t.Context(), task)
	res, err := ep.Step(t.Context(), Action{Tool: "finish", Arguments: json.RawMessage(`{"answers":[1187]}`)})
	if err != nil || res.Score == nil || !res.Score.Success || res.Score.PerQuestion[0].Answer != "1187" {
		t.Errorf("finish with a bare number: %+v, %v; want it read as \"1187\"", res, err)
	}
}

func TestQAStepLimitFinish(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	ep, _ := q.Reset(t.Context(), ts[0])
	s := ep.Finish(t.Context())
	if s.Success || s.EM != 0 || s.F1 != 0 || len(s.PerQuestion) != 8 || s.PerQuestion[0].Answer != "" {
		t.Errorf("Finish without answers = %+v, want all empty and zero", s)
	}
	if _, err := ep.Step(t.Context(), Action{Tool: "search", Arguments: json.RawMessage(`{"query":"x"}`)}); err == nil {
		t.Error("Step after Finish succeeded, want an error")
	}
}

func TestQAContext(t *testing.T) {
	q := loadEmbedded(t)
	ts, _ := q.Tasks("train")
	ctx, cancel := context.WithCancel(t.Context())
	ep, _ := q.Reset(ctx, ts[0])
	cancel()
	if _, err := ep.Step(ctx, Action{Tool: "search", Arguments: json.RawMessage(`{"query":"x"}`)}); err == nil {
		t.Error("Step with a cancelled context succeeded")
	}
	if _, err := q.Reset(ctx, ts[0]); err == nil {
		t.Error("Reset with a cancelled context succeeded")
	}
	if _, err := q.Reset(t.Context(), Task{ID: "empty"}); err == nil {
		t.Error("Reset of a task without questions succeeded")
	}
}

func TestQAOptions(t *testing.T) {
	q, err := NewQA(QAOptions{TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.searchIndex().search("What is the capital of Veloria?", q.topK)) != 5 {
		t.Errorf("options not applied: top k %d", q.topK)
	}
	if _, err := NewQA(QAOptions{TopK: -1}); err == nil {
		t.Error("NewQA with a negative top k succeeded")
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
