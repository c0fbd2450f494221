package env

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/jsonl"
)

// validTask renders a task line with 8 questions whose texts start with prefix.
func validTask(id, prefix string) string {
	var qs []string
	for i := range 8 {
		qs = append(qs, fmt.Sprintf(`{"q":"What is the capital of %s%d?","answers":["Marnth"]}`, prefix, i))
	}
	return fmt.Sprintf(`{"id":%q,"questions":[%s]}`, id, strings.Join(qs, ","))
}

// writeDataset writes a small valid dataset into a temp dir, with files
// overriding (or, when "", deleting) the named files.
func writeDataset(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	base := map[string]string{
		"corpus.jsonl": `{"id":"d00001","title":"Veloria","text":"The capital of Veloria is Marnth."}` + "\n" +
			`{"id":"d00002","title":"Ostrel","text":"Ostrel's patron is Saint Ilvara."}` + "\n",
		"train.jsonl": validTask("qa-train-0001", "Train") + "\n\n" + validTask("qa-train-0002", "More") + "\n",
		"test.jsonl":  validTask("qa-test-0001", "Test") + "\n",
	}
	for name, data := range files {
		base[name] = data
	}
	for name, data := range base {
		if data == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestQALoadDir(t *testing.T) {
	dir := writeDataset(t, map[string]string{"VERSION": "test-1\n"})
	q, err := NewQA(QAOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	train, _ := q.Tasks("train")
	if len(train) != 2 || len(q.data.passages) != 2 || q.Version() != "test-1" {
		t.Errorf("loaded %d train tasks, %d passages, version %q; want 2, 2, test-1", len(train), len(q.data.passages), q.Version())
	}
	if want := "Q1: What is the capital of Train0?\nQ2: What is the capital of Train1?"; !strings.HasPrefix(train[0].Prompt, want) || strings.HasSuffix(train[0].Prompt, "\n") {
		t.Errorf("prompt = %q, want Qn lines without a trailing newline", train[0].Prompt)
	}
}

func TestQALoadErrors(t *testing.T) {
	tooFew := strings.Replace(validTask("qa-train-0001", "Train"), `,{"q":"What is the capital of Train7?","answers":["Marnth"]}`, "", 1)
	tests := []struct {
		name  string
		files map[string]string
		want  string // path relative to the dataset dir, then the message
	}{
		{"missing corpus", map[string]string{"corpus.jsonl": ""},
			"corpus.jsonl: no such file; set env.dataset in the job file to a directory with corpus.jsonl, train.jsonl and test.jsonl"},
		{"missing test", map[string]string{"test.jsonl": ""}, "test.jsonl: no such file"},
		{"malformed line", map[string]string{"corpus.jsonl": `{"id":"d1","title":"A","text":"x"}` + "\n" + `{"id":"d2",` + "\n"},
			"corpus.jsonl:2: malformed JSON"},
		{"unknown field", map[string]string{"corpus.jsonl": `{"id":"d1","title":"A","text":"x","url":"u"}` + "\n"},
			`corpus.jsonl:1: unknown field "url"`},
		{"missing field", map[string]string{"corpus.jsonl": `{"id":"d1","text":"x"}` + "\n"},
			`corpus.jsonl:1: field "title": missing or empty`},
		{"wrong type", map[string]string{"corpus.jsonl": `{"id":1,"title":"A","text":"x"}` + "\n"},
			`corpus.jsonl:1: field "id": want string, got JSON number`},
		{"two values on a line", map[string]string{"corpus.jsonl": `{"id":"d1","title":"A","text":"x"} {}` + "\n"},
			"corpus.jsonl:1: malformed JSON: more than one value on the line"},
		{"blank line in text", map[string]string{"corpus.jsonl": `{"id":"d1","title":"A","text":"x\n\ny"}` + "\n"},
			`corpus.jsonl:1: field "text": contains a blank line`},
		{"duplicate passage id", map[string]string{"corpus.jsonl": `{"id":"d1","title":"A","text":"x"}` + "\n\n" + `{"id":"d1","title":"B","text":"y"}` + "\n"},
			`corpus.jsonl:3: field "id": "d1" already used on line 1`},
		{"empty corpus", map[string]string{"corpus.jsonl": "\n"}, "corpus.jsonl is empty"},
		{"seven questions", map[string]string{"train.jsonl": validTask("qa-train-0009", "A") + "\n" + tooFew + "\n"},
			`train.jsonl:2: field "questions": want 8 questions, got 7`},
		{"question line number counts blank lines", map[string]string{"train.jsonl": "\n\n" + tooFew + "\n"},
			`train.jsonl:3: field "questions": want 8 questions, got 7`},
		{"nested unknown field", map[string]string{"test.jsonl": strings.Replace(validTask("qa-test-0001", "T"), `"answers"`, `"gold"`, 1) + "\n"},
			`test.jsonl:1: unknown field "gold"`},
		{"no answers", map[string]string{"test.jsonl": strings.Replace(validTask("qa-test-0001", "T"), `["Marnth"]`, `[]`, 1) + "\n"},
			`test.jsonl:1: field "questions[0].answers": want at least one answer`},
		{"answer only an article", map[string]string{"test.jsonl": strings.Replace(validTask("qa-test-0001", "T"), `["Marnth"]`, `["Marnth","The"]`, 1) + "\n"},
			`test.jsonl:1: field "questions[0].answers[1]": empty after normalization`},
		{"empty question", map[string]string{"test.jsonl": strings.Replace(validTask("qa-test-0001", "T"), `"What is the capital of T0?"`, `""`, 1) + "\n"},
			`test.jsonl:1: field "questions[0].q": want one non-empty line`},
		{"duplicate task id across splits", map[string]string{"test.jsonl": validTask("qa-train-0001", "T") + "\n"},
			`test.jsonl:1: field "id": task "qa-train-0001" already defined at `},
		{"question in both splits", map[string]string{"test.jsonl": validTask("qa-test-0001", "Train") + "\n"},
			`test.jsonl:1: field "questions[0].q": "What is the capital of Train0?" is also asked at `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDataset(t, tt.files)
			_, err := NewQA(QAOptions{Dir: dir})
			if err == nil {
				t.Fatal("NewQA succeeded, want an error")
			}
			want := filepath.Join(dir, tt.want)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, want)
			}
		})
	}
}

func TestQALoadMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := NewQA(QAOptions{Dir: dir})
	want := "open dataset " + filepath.Join(dir, "corpus.jsonl") + ": no such file; set env.dataset"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v, want prefix %q", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not match fs.ErrNotExist", err)
	}
}

// A dataset opened again is the one loaded before while its files' bytes
// and the limits stay the same: a file edited in place (VERSION unchanged)
// or tighter limits load it anew, and a file broken since fails.
func TestQALoadedOnceByContent(t *testing.T) {
	dir := writeDataset(t, map[string]string{"VERSION": "v1\n"})
	open := func(lim int64) (*QA, error) {
		return NewQA(QAOptions{Dir: dir, Limits: jsonl.Limits{Line: lim}})
	}
	a, err := open(0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := open(0)
	if err != nil || b.data != a.data {
		t.Fatalf("opened again: %v, shares the load %v", err, err == nil && b.data == a.data)
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	old, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corpus, []byte(strings.Replace(string(old), "Marnth", "Kelso", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := open(0)
	if err != nil || c.data == a.data || c.Settings() == a.Settings() || !strings.Contains(c.search("capital of Veloria"), "Kelso") {
		t.Fatalf("edited corpus: %v; want a new load naming other content", err)
	}
	if _, err := open(40); err == nil || !strings.Contains(err.Error(), "corpus.jsonl") {
		t.Errorf("a line over tighter limits: %v, want an error naming the file", err)
	}
	if err := os.WriteFile(corpus, append(old, "{\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(0); err == nil || !strings.Contains(err.Error(), "corpus.jsonl:3") {
		t.Errorf("a broken corpus: %v, want an error naming its line", err)
	}
}
