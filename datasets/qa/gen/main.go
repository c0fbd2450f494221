// Command gen writes the bundled qa dataset (datasets/qa): a synthetic
// fictional world of syllable-built places, so no real-world knowledge
// helps, its corpus of passages, and 8-question train and test tasks in
// the formats of docs/embedded-model.md ("QA formats").
//
// The output depends only on the flags: the same seed gives byte-identical
// files.
//
//	go run ./datasets/qa/gen -seed 42 -out datasets/qa -train 100 -test 100
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/ctxopt/ctxopt/internal/datagen"
)

// questionsPerTask is fixed by the benchmark (ACON D.1, 8-objective QA).
const questionsPerTask = 8

// datasetVersion changes when the generator's output format or content
// rules change; the seed and counts are appended as build metadata.
const datasetVersion = "1.0.0"

type config struct {
	datagen.Config
	// entities overrides the world size (0: sized to the task count).
	entities int
}

func main() {
	var cfg config
	cfg.Flags(flag.CommandLine, "datasets/qa")
	flag.IntVar(&cfg.entities, "entities", 0, "number of entities in the world (0: enough for the tasks)")
	flag.Parse()
	os.Exit(datagen.Main(cfg.Out, func() (map[string][]byte, error) { return generate(cfg) }))
}

type corpusLine struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

type taskLine struct {
	ID        string         `json:"id"`
	Questions []questionLine `json:"questions"`
}

type questionLine struct {
	Q       string   `json:"q"`
	Answers []string `json:"answers"`
}

// generate builds the world, checks the corpus and renders every file.
func generate(cfg config) (map[string][]byte, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.entities < 0 {
		return nil, fmt.Errorf("-entities must not be negative, got %d", cfg.entities)
	}
	base, siblings := worldSize(cfg.Train + cfg.Test)
	if cfg.entities > 0 {
		siblings = cfg.entities * siblingEntities / (baseEntities + siblingEntities)
		base = cfg.entities - siblings
	}
	w := newWorld(cfg.Seed, base, siblings)
	ps := w.passages()
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = fmt.Sprintf("d%05d", i+1)
	}
	if err := w.checkCorpus(ps, ids); err != nil {
		return nil, fmt.Errorf("corpus check: %w", err)
	}
	tasks, err := w.tasks(cfg.Train, cfg.Test)
	if err != nil {
		return nil, err
	}
	var corpus bytes.Buffer
	for i, p := range ps {
		if err := writeJSONLine(&corpus, corpusLine{ids[i], p.title, p.text}); err != nil {
			return nil, err
		}
	}
	split := func(name string, ts [][]int) ([]byte, error) {
		var b bytes.Buffer
		for i, t := range ts {
			line := taskLine{ID: fmt.Sprintf("qa-%s-%04d", name, i+1)}
			for _, f := range t {
				ft := w.facts[f]
				line.Questions = append(line.Questions, questionLine{w.question(ft), append([]string{ft.answer}, ft.aliases...)})
			}
			if err := writeJSONLine(&b, line); err != nil {
				return nil, err
			}
		}
		return b.Bytes(), nil
	}
	train, err := split("train", tasks[:cfg.Train])
	if err != nil {
		return nil, err
	}
	test, err := split("test", tasks[cfg.Train:])
	if err != nil {
		return nil, err
	}
	version := cfg.Version(datasetVersion)
	st := w.stats(ps, tasks, cfg.Train)
	st.version, st.seed = version, cfg.Seed
	st.bytes = corpus.Len() + len(train) + len(test)
	return map[string][]byte{
		"corpus.jsonl": corpus.Bytes(),
		"train.jsonl":  train,
		"test.jsonl":   test,
		"VERSION":      []byte(version + "\n"),
		"README.md":    st.readme(),
	}, nil
}

func writeJSONLine(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	return nil
}

// tasks groups facts into train then test tasks of questionsPerTask
// questions about distinct entities; no fact is asked twice, so splits share
// no question. In each split, the share of tasks with one archive-form fact
// is what drawing questions at random would give on average,
// 1-(1-form3Percent/100)^8 (about 22%), so train and test fail the embedded
// agent's baseline equally often.
func (w *world) tasks(nTrain, nTest int) ([][]int, error) {
	var form3, other []int
	for _, f := range w.r.Perm(len(w.facts)) {
		if w.facts[f].form == 3 {
			form3 = append(form3, f)
		} else {
			other = append(other, f)
		}
	}
	used := make([]bool, len(w.facts))
	share := 1 - math.Pow(1-form3Percent/100.0, questionsPerTask)
	var out [][]int
	for _, n := range []int{nTrain, nTest} {
		withForm3 := map[int]bool{}
		for _, i := range w.r.Perm(n)[:int(math.Round(share*float64(n)))] {
			withForm3[i] = true
		}
		for i := range n {
			ents := map[int]bool{}
			var t []int
			take := func(pool *[]int, want int) {
				// Drop the used head, so packing many tasks stays linear.
				for len(*pool) > 0 && used[(*pool)[0]] {
					*pool = (*pool)[1:]
				}
				for _, f := range *pool {
					if len(t) == want {
						return
					}
					if !used[f] && !ents[w.facts[f].entity] {
						used[f], ents[w.facts[f].entity] = true, true
						t = append(t, f)
					}
				}
			}
			if withForm3[i] {
				take(&form3, 1)
			}
			take(&other, questionsPerTask)
			if len(t) < questionsPerTask || withForm3[i] && w.facts[t[0]].form != 3 {
				return nil, fmt.Errorf("%d facts are too few for %d tasks of %d questions; ask for fewer tasks or more -entities", len(w.facts), nTrain+nTest, questionsPerTask)
			}
			w.r.Shuffle(len(t), func(i, j int) { t[i], t[j] = t[j], t[i] })
			out = append(out, t)
		}
	}
	return out, nil
}

type stats struct {
	version                string
	seed                   uint64
	entities, facts, form3 int
	passages, distractors  int
	minWords, maxWords     int
	meanWords              float64
	train, test            int
	form3Train, form3Test  int
	bytes                  int
	relations              []string
}

func (w *world) stats(ps []passage, tasks [][]int, nTrain int) stats {
	st := stats{entities: len(w.entities), facts: len(w.facts), passages: len(ps), minWords: maxPassageWords, train: nTrain, test: len(tasks) - nTrain}
	for _, f := range w.facts {
		if f.form == 3 {
			st.form3++
		}
	}
	total := 0
	for _, p := range ps {
		if len(p.facts) == 0 {
			st.distractors++
		}
		n := wordCount(p.text)
		total += n
		st.minWords, st.maxWords = min(st.minWords, n), max(st.maxWords, n)
	}
	st.meanWords = float64(total) / float64(len(ps))
	for i, t := range tasks {
		for _, f := range t {
			if w.facts[f].form == 3 {
				if i < nTrain {
					st.form3Train++
				} else {
					st.form3Test++
				}
				break
			}
		}
	}
	for _, r := range relations {
		st.relations = append(st.relations, "`"+r.name+"`")
	}
	return st
}

func (st stats) readme() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `# qa: synthetic 8-objective QA

Version %s. Generated by `+"`datasets/qa/gen`"+` (seed %d); regenerate with

    go generate ./datasets

or `+"`go run ./datasets/qa/gen -seed %d -out datasets/qa -train %d -test %d`"+` from the
repository root. The same seed gives byte-identical files; the tests check
that these files are the generator's output.

The built-in `+"`qa`"+` environment (env.NewQA) embeds these files. It mirrors ACON's
8-objective QA (appendix D.1): every task asks eight questions, the agent
searches a BM25 index over the corpus and answers all eight at the end,
scored by SQuAD exact match and token F1. The world is fictional, built
from syllable names, so no real-world knowledge helps; only retrieved
passages do.

## Files

| file | lines | content |
| --- | --- | --- |
| corpus.jsonl | %d | `+"`"+`{"id":"d00001","title":"...","text":"..."}`+"`"+` passages |
| train.jsonl | %d | `+"`"+`{"id":"qa-train-0001","questions":[{"q":"...","answers":["..."]}, ...]}`+"`"+` |
| test.jsonl | %d | the same, ids `+"`qa-test-NNNN`"+` |
| VERSION | 1 | `+"`%s`"+` |

Total %.2f MB.

## World and corpus

- %d entities (one or two capitalised words; some share a first word, such
  as `+"`X`"+` and `+"`X Minor`"+`, so retrieval must be exact), each with 4 to 6 facts
  over %d relations: %s.
- %d facts, each written in exactly one passage, in one of the three forms
  of docs/embedded-model.md: `+"`The <relation> of <entity> is <answer>.`"+`,
  `+"`<entity>'s <relation> is <answer>.`"+`, or, for %d facts (%.1f%%, chosen by the
  seeded generator), `+"`<answer> is listed in the archives of <entity> under <relation>.`"+`
- %d passages of %d to %d words (mean %.0f): two per entity holding its facts
  among filler, and %d distractors (travel diaries, legends, comparisons of
  similar names) that mention entities and relations but state no fact.
- The generator fails unless no passage contains a controlled word (%s),
  every `+"`the R of E is A.`"+` / `+"`E's R is A.`"+` match in the corpus is a true fact
  written once, and passages have no ':', '=' or '>' (fact-cache lookalikes).

## Tasks

%d train and %d test tasks of %d questions `+"`What is the <relation> of <entity>?`"+`,
about eight distinct entities each. No fact is asked twice, so the splits
share no question. Answers list the answer and its obvious aliases (the bare
name of `+"`Mount X`"+`, `+"`Lake X`"+`, `+"`X River`"+`, `+"`House X`"+`, `+"`Saint X`"+`, a founder's surname).
Tasks with one archive-form fact, which the embedded agent cannot read: %d of %d
train (%.0f%%) and %d of %d test (%.0f%%), the share random draws would give on
average, fixed per split so both fail the embedded baseline equally often.

## Larger task sets

Asking for more tasks than this world holds grows the world: about 1.25
facts per question, so 5,000 tasks (`+"`-train 4000 -test 1000`"+`, 40,000 questions)
get a world of 10,000 entities and a 28 MB corpus, generated in a few
seconds, deterministic like the default (the generator's tests pin the
5,000-task files by hash). Point the qa environment at the directory
(`+"`env: {name: qa, dataset: DIR}`"+`) to roll out at scale; `+"`-entities N`"+` fixes the
world size instead.
`,
		st.version, st.seed, st.seed, st.train, st.test,
		st.passages, st.train, st.test, st.version,
		float64(st.bytes)/1e6,
		st.entities, len(st.relations), strings.Join(st.relations, ", "),
		st.facts, st.form3, 100*float64(st.form3)/float64(st.facts),
		st.passages, st.minWords, st.maxWords, st.meanWords, st.distractors,
		strings.Join(controlledWords, ", "),
		st.train, st.test, questionsPerTask,
		st.form3Train, st.train, 100*float64(st.form3Train)/float64(st.train),
		st.form3Test, st.test, 100*float64(st.form3Test)/float64(st.test),
	)
	return []byte(b.String())
}
