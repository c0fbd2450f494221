package env

import (
	"strings"
	"testing"
)

// TestQASettings: every option that changes what a qa task is or how it
// is answered, and the dataset's content, change Settings alone; limits on
// input size do not.
func TestQASettings(t *testing.T) {
	dir := writeDataset(t, map[string]string{"VERSION": "1\n"})
	edited := writeDataset(t, map[string]string{
		"VERSION":      "1\n", // same version, other content
		"corpus.jsonl": `{"id":"d00001","title":"Veloria","text":"The capital of Veloria is Quenth."}` + "\n",
	})
	base := QAOptions{Dir: dir, TopK: 3}
	settings := func(t *testing.T, o QAOptions) string {
		t.Helper()
		q, err := NewQA(o)
		if err != nil {
			t.Fatal(err)
		}
		return q.Settings()
	}
	want := settings(t, base)
	for _, tc := range []struct {
		name    string
		edit    func(o *QAOptions)
		changed bool
	}{
		{"same options", func(*QAOptions) {}, false},
		{"top_k 0 is the default 3", func(o *QAOptions) { o.TopK = 0 }, false},
		{"line and file limits", func(o *QAOptions) { o.Limits.Line, o.Limits.File = 1<<16, 1<<20 }, false},
		{"top_k", func(o *QAOptions) { o.TopK = 5 }, true},
		{"search_budget", func(o *QAOptions) { o.SearchBudget = 4 }, true},
		{"questions_per_task", func(o *QAOptions) { o.QuestionsPerTask = 4 }, true},
		{"dataset content, same VERSION", func(o *QAOptions) { o.Dir = edited }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			got := settings(t, o)
			if (got != want) != tc.changed {
				t.Fatalf("settings %q, base %q: changed %v, want %v", got, want, got != want, tc.changed)
			}
		})
	}
}

// TestOfficeSettings names the bundled dataset's version and content.
func TestOfficeSettings(t *testing.T) {
	o, err := NewOffice()
	if err != nil {
		t.Fatal(err)
	}
	if s := o.Settings(); !strings.HasPrefix(s, o.Version()+" content=") || len(s) <= len(o.Version()+" content=") {
		t.Fatalf("settings %q do not name version %q and a content digest", s, o.Version())
	}
}
