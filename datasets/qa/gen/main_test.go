package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/datagen"
	"github.com/ctxopt/ctxopt/internal/golden"
)

var defaultConfig = config{Config: datagen.Config{Seed: 42, Train: 100, Test: 100}}

// TestGenerateDeterministic generates twice into temp dirs and compares the
// files with each other and with the checked-in dataset.
func TestGenerateDeterministic(t *testing.T) {
	var dirs []string
	for range 2 {
		cfg := defaultConfig
		cfg.Out = t.TempDir()
		files, err := generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := datagen.Write(cfg.Out, files); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, cfg.Out)
	}
	for _, name := range []string{"corpus.jsonl", "train.jsonl", "test.jsonl", "VERSION", "README.md"} {
		a := readFile(t, filepath.Join(dirs[0], name))
		if b := readFile(t, filepath.Join(dirs[1], name)); !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
		if checkedIn := readFile(t, filepath.Join("..", name)); !bytes.Equal(a, checkedIn) {
			t.Errorf("datasets/qa/%s is not the generator's output; run go generate ./datasets", name)
		}
	}
	if total := len(readFile(t, filepath.Join(dirs[0], "corpus.jsonl"))) + len(readFile(t, filepath.Join(dirs[0], "train.jsonl"))) + len(readFile(t, filepath.Join(dirs[0], "test.jsonl"))); total > 3<<20 {
		t.Errorf("dataset is %d bytes, want under 3 MB", total)
	}
}

func TestGenerateSeed(t *testing.T) {
	a, err := generate(defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig
	cfg.Seed = 7
	b, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a["corpus.jsonl"], b["corpus.jsonl"]) {
		t.Error("seeds 42 and 7 gave the same corpus")
	}
	if _, err := generate(config{Config: datagen.Config{Seed: 1, Train: 0, Test: 1}}); err == nil {
		t.Error("generate with no train tasks succeeded")
	}
	if _, err := generate(config{Config: datagen.Config{Seed: 1, Train: 40, Test: 40}, entities: 120}); err == nil || !strings.Contains(err.Error(), "too few") {
		t.Errorf("generate with more questions than facts: %v, want a too-few error", err)
	}
	if _, err := generate(config{Config: datagen.Config{Seed: 1, Train: 1, Test: 1}, entities: -1}); err == nil {
		t.Error("generate with negative -entities succeeded")
	}
}

// TestGenerateAtScale generates 5,000 tasks once and checks they are
// distinct (no question asked twice, none repeated within a task) and that
// the files hash to testdata/scale5000.sha256, so the same seed gives the
// same 5,000 tasks on every machine.
func TestGenerateAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 28 MB dataset")
	}
	cfg := config{Config: datagen.Config{Seed: 42, Train: 4000, Test: 1000}}
	files, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sums strings.Builder
	questions := map[string]bool{}
	tasks := map[string]bool{}
	for _, name := range []string{"corpus.jsonl", "train.jsonl", "test.jsonl", "VERSION", "README.md"} {
		data := files[name]
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(data), name)
		if name != "train.jsonl" && name != "test.jsonl" {
			continue
		}
		for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var task taskLine
			if err := json.Unmarshal(line, &task); err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			if len(task.Questions) != questionsPerTask {
				t.Fatalf("%s: task %s has %d questions", name, task.ID, len(task.Questions))
			}
			for _, q := range task.Questions {
				if questions[q.Q] {
					t.Fatalf("%s: task %s asks %q again", name, task.ID, q.Q)
				}
				questions[q.Q] = true
			}
			tasks[task.ID] = true
		}
	}
	if len(tasks) != 5000 {
		t.Errorf("%d distinct tasks, want 5000", len(tasks))
	}
	t.Logf("%d distinct tasks, %d distinct questions", len(tasks), len(questions))
	golden.Check(t, "scale5000.sha256", sums.String())
}

func TestBannedWord(t *testing.T) {
	tests := []struct{ in, want string }{
		{"A quiet region of hills.", ""},
		{"The lighthouse keeper waved.", "keep"},
		{"It was Ruled by a council.", "rule"},
		{"An old catalogue of ships.", "log"},
		{"She spoke VERBATIM.", "verbatim"},
		{"Exactly so.", "exact"},
		{"Long swords hung there.", "words"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := bannedWord(tt.in); got != tt.want {
				t.Errorf("bannedWord(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestCheckCorpus breaks a generated corpus in each way the check guards
// against and expects it to fail.
func TestCheckCorpus(t *testing.T) {
	w := newWorld(42, baseEntities, siblingEntities)
	ps := w.passages()
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = "d" + string(rune('0'+i%10))
	}
	if err := w.checkCorpus(ps, ids); err != nil {
		t.Fatalf("generated corpus fails its check: %v", err)
	}
	var withFact, distractor int
	for i, p := range ps {
		// Room for one more fact sentence within the length bound.
		if len(p.facts) > 0 && w.facts[p.facts[0]].form != 3 && wordCount(p.text) <= maxPassageWords-12 {
			withFact = i
		}
		if len(p.facts) == 0 && wordCount(p.text) <= maxPassageWords-15 {
			distractor = i
		}
	}
	e0, e1 := w.entities[0].name, w.entities[1].name
	tests := []struct {
		name   string
		at     int
		mutate func(string) string
		want   string
	}{
		{"controlled word", distractor, func(s string) string { return s + " The keeper slept." }, `controlled word "keep"`},
		{"false form 1 fact", distractor, func(s string) string { return s + " The capital of " + e0 + " is unknown." }, "readable facts"},
		{"false form 2 fact", distractor, func(s string) string { return s + " Everyone knows " + e1 + "'s currency is gold." }, "readable facts"},
		{"form 2 inside a longer name", distractor, func(s string) string { return s + " X" + strings.ToLower(e1) + "'s patron is Saint Nobody." }, "readable facts"},
		{"stray archive sentence", distractor, func(s string) string { return s + " Salt is listed in the archives of " + e0 + " under trade." }, "archive sentences"},
		{"fact-cache lookalike", distractor, func(s string) string { return s + " capital of " + e0 + ": Marnth." }, "contains ':'"},
		{"too long", distractor, func(s string) string { return s + strings.Repeat(" and", 60) }, "words, want 110 to 170"},
		{"fact written twice", withFact, func(s string) string {
			return s + " " + w.sentence(w.facts[ps[withFact].facts[0]])
		}, "readable facts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			broken := append([]passage(nil), ps...)
			broken[tt.at].text = tt.mutate(broken[tt.at].text)
			err := w.checkCorpus(broken, ids)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("check = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("fact in no passage", func(t *testing.T) {
		broken := append([]passage(nil), ps...)
		broken[withFact].facts = broken[withFact].facts[1:]
		broken[withFact].text = strings.Replace(broken[withFact].text, w.sentence(w.facts[ps[withFact].facts[0]]), "", 1)
		if err := w.checkCorpus(broken, ids); err == nil || !strings.Contains(err.Error(), "written in 0 passages") {
			t.Errorf("check = %v, want a fact written in 0 passages", err)
		}
	})
}

// TestFillerAvoidsRelations keeps relation terms out of entity filler, so
// a question's terms point at the passage stating its fact.
func TestFillerAvoidsRelations(t *testing.T) {
	terms := map[string]bool{}
	for _, r := range relations {
		for _, f := range strings.Fields(r.name) {
			terms[f] = true
		}
	}
	var texts []string
	texts = append(texts, introTemplates...)
	texts = append(texts, fillerTemplates...)
	for _, vals := range slotValues {
		texts = append(texts, vals...)
	}
	for _, s := range texts {
		for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r < 'a' || r > 'z' }) {
			if terms[f] {
				t.Errorf("filler %q uses the relation term %q", s, f)
			}
		}
		if b := bannedWord(s); b != "" {
			t.Errorf("filler %q uses the controlled word %q", s, b)
		}
	}
}

func TestTasks(t *testing.T) {
	w := newWorld(42, baseEntities, siblingEntities)
	tasks, err := w.tasks(100, 100)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[int]bool{}
	form3 := [2]int{}
	for i, task := range tasks {
		ents := map[int]bool{}
		for _, f := range task {
			if asked[f] || ents[w.facts[f].entity] {
				t.Fatalf("task %d: fact %d asked twice or entity repeated", i, f)
			}
			asked[f], ents[w.facts[f].entity] = true, true
			if w.facts[f].form == 3 {
				form3[i/100]++
			}
		}
		if len(task) != questionsPerTask {
			t.Fatalf("task %d has %d questions", i, len(task))
		}
	}
	// 1-(0.97)^8 = 21.6%, rounded per split of 100.
	if form3 != [2]int{22, 22} {
		t.Errorf("archive-form questions per split = %v, want 22 each", form3)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
