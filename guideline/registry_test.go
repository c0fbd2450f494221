package guideline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/internal/golden"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// seedRegistry stores a seed, its UT child and the CO grandchild.
func seedRegistry(t *testing.T) (*Registry, [3]Record) {
	t.Helper()
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "guidelines"))
	if err != nil {
		t.Fatal(err)
	}
	seedSrc := readFile(t, "history_seed.tmpl")
	utSrc := strings.Replace(seedSrc, "4. Note errors and failed attempts so they are not repeated.\n",
		"4. Note errors and failed attempts so they are not repeated.\n5. Keep a VARS table of every id, token and page index the next step needs.\n", 1)
	coSrc := strings.Replace(utSrc, "1. Keep every section relevant and short.\n", "1. At most two sentences per section.\n", 1)

	var recs [3]Record
	steps := []struct {
		step, src string
		round     int
	}{{StepSeed, seedSrc, 0}, {StepUT, utSrc, 1}, {StepCO, coSrc, 1}}
	parent := ""
	for i, s := range steps {
		rec, _, err := reg.Put(Record{Kind: KindHistory, Parent: parent, Round: s.round, Step: s.step,
			Created: t0.Add(time.Duration(i) * time.Minute), Source: "optimizer", FeedbackIDs: []string{fmt.Sprintf("fb-%d", i)}}, s.src)
		if err != nil {
			t.Fatal(err)
		}
		recs[i], parent = rec, rec.ID
	}
	return reg, recs
}

func TestRegistryPutGet(t *testing.T) {
	reg, recs := seedRegistry(t)
	seed := recs[0]
	if !seed.Validation.OK || seed.ID != ID(KindHistory, readFile(t, "history_seed.tmpl")) {
		t.Fatalf("seed record: %+v", seed)
	}
	for _, ext := range []string{".tmpl", ".json"} {
		if _, err := os.Stat(filepath.Join(reg.Dir(), seed.ID+ext)); err != nil {
			t.Error(err)
		}
	}

	tests := []struct {
		name, id string
		want     string
		err      error
	}{
		{"full id", seed.ID, seed.ID, nil},
		{"prefix", seed.ID[:6], seed.ID, nil},
		{"hash prefix", seed.ID[2:7], seed.ID, nil},
		{"too short", seed.ID[2:4], "", ErrNotFound},
		{"absent", "h-000000000000", "", ErrNotFound},
		{"path", "../guidelines/" + seed.ID, "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, src, err := reg.Get(tt.id)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err == nil && (rec.ID != tt.want || src != readFile(t, "history_seed.tmpl")) {
				t.Errorf("got %s", rec.ID)
			}
		})
	}

	t.Run("idempotent put merges", func(t *testing.T) {
		rec, _, err := reg.Put(Record{Kind: KindHistory, Step: StepSeed, Source: "other", FeedbackIDs: []string{"fb-0", "fb-9"},
			Scores: map[string]float64{"success": 0.5}, Created: t0.Add(time.Hour)}, readFile(t, "history_seed.tmpl"))
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err = reg.Put(Record{Kind: KindHistory, Scores: map[string]float64{"success": 0.75, "cost": 0.2}}, readFile(t, "history_seed.tmpl"))
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Created.Equal(t0) || rec.Source != "optimizer" || strings.Join(rec.FeedbackIDs, ",") != "fb-0,fb-9" ||
			rec.Scores["success"] != 0.75 || rec.Scores["cost"] != 0.2 {
			t.Errorf("merged record: %+v", rec)
		}
		if got, _, _ := reg.Get(rec.ID); got.Scores["success"] != 0.75 {
			t.Errorf("stored scores: %v", got.Scores)
		}
	})

	t.Run("bad records", func(t *testing.T) {
		src := readFile(t, "history_seed.tmpl")
		for _, rec := range []Record{
			{Kind: "summary"},
			{Kind: KindHistory, Step: "mutate"},
			{Kind: KindHistory, Step: StepUT, Parent: "h-000000000000"},
			{Kind: KindHistory, Parent: seed.ID},
			{Kind: KindHistory, ID: "h-000000000000"},
		} {
			if _, _, err := reg.Put(rec, src); err == nil {
				t.Errorf("Put(%+v) succeeded", rec)
			}
		}
	})

	t.Run("rejected is stored with its problems", func(t *testing.T) {
		rec, _, err := reg.Put(Record{Kind: KindHistory, Step: StepSeed}, "{{ task }} {% include \"x\" %}")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Validation.OK || len(rec.Validation.Problems) == 0 {
			t.Errorf("validation: %+v", rec.Validation)
		}
		if _, err := reg.Promote(rec.ID); !errors.Is(err, ErrRejected) {
			t.Errorf("promote rejected: err = %v", err)
		}
	})
}

func TestRegistryAmbiguousPrefix(t *testing.T) {
	reg, err := OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Find two sources whose ids share 4 hash digits (birthday bound: a few
	// hundred tries, deterministic).
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		src := fmt.Sprintf("Variant %d.\n%s", i, histVars)
		p := ID(KindHistory, src)[2:6]
		if prev, ok := seen[p]; ok {
			a, b = prev, src
		}
		seen[p] = src
	}
	for _, src := range []string{a, b} {
		if _, _, err := reg.Put(Record{Kind: KindHistory}, src); err != nil {
			t.Fatal(err)
		}
	}
	prefix := ID(KindHistory, a)[:6]
	if _, _, err := reg.Get(prefix); !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), ID(KindHistory, b)) {
		t.Errorf("Get(%s): err = %v, want ambiguous naming both", prefix, err)
	}
}

func TestRegistryListLineage(t *testing.T) {
	reg, recs := seedRegistry(t)
	// An older observation seed sorts first.
	obs, _, err := reg.Put(Record{Kind: KindObservation, Created: t0.Add(-time.Hour), Source: "builtin:prompting"}, readFile(t, "observation_seed.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := reg.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	if want := []string{obs.ID, recs[0].ID, recs[1].ID, recs[2].ID}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("List = %v, want %v", ids, want)
	}

	chain, err := reg.Lineage(recs[2].ID[:8])
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, r := range chain {
		steps = append(steps, r.Step+":"+r.ID)
	}
	want := []string{"seed:" + recs[0].ID, "ut:" + recs[1].ID, "co:" + recs[2].ID}
	if strings.Join(steps, " ") != strings.Join(want, " ") {
		t.Errorf("Lineage = %v, want %v", steps, want)
	}
	if chain, err := reg.Lineage(obs.ID); err != nil || len(chain) != 1 {
		t.Errorf("seed lineage = %v, %v", chain, err)
	}
}

func TestRegistryDiff(t *testing.T) {
	reg, recs := seedRegistry(t)
	tests := []struct{ name, a, b string }{
		{"seed_ut", recs[0].ID, recs[1].ID},
		{"seed_co", recs[0].ID, recs[2].ID},
		{"co_seed", recs[2].ID, recs[0].ID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := reg.Diff(tt.a, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("diff", tt.name+".golden"), d)
		})
	}
	if d, err := reg.Diff(recs[0].ID, recs[0].ID); err != nil || d != "" {
		t.Errorf("diff with itself = %q, %v", d, err)
	}
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"no_final_newline", "a\nb\nc", "a\nb\nd"},
		{"from_empty", "", "x\ny\n"},
		{"to_empty", "x\n", ""},
		{"two_hunks", strings.Repeat("l\n", 3) + "old1\n" + strings.Repeat("m\n", 10) + "old2\n", strings.Repeat("l\n", 3) + "new1\n" + strings.Repeat("m\n", 10) + "new2\n"},
		{"joined_hunks", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\nY\n8\n"},
	}
	var all strings.Builder
	for _, tt := range tests {
		fmt.Fprintf(&all, "== %s\n%s", tt.name, unifiedDiff("a", "b", tt.a, tt.b))
	}
	golden.Check(t, filepath.Join("diff", "cases.golden"), all.String())
}

func TestRegistryPromote(t *testing.T) {
	reg, recs := seedRegistry(t)
	obs, _, err := reg.Put(Record{Kind: KindObservation}, readFile(t, "observation_seed.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{obs.ID, recs[1].ID, recs[2].ID} {
		if _, err := reg.Promote(id); err != nil {
			t.Fatal(err)
		}
	}
	promoted := map[string]bool{}
	list, _ := reg.List()
	for _, r := range list {
		promoted[r.ID] = r.Promoted
	}
	if !promoted[recs[2].ID] || promoted[recs[1].ID] || promoted[recs[0].ID] || !promoted[obs.ID] {
		t.Errorf("promoted = %v; want the CO guideline and the observation one", promoted)
	}
	_, coSrc, _ := reg.Get(recs[2].ID)
	for kind, want := range map[Kind]string{KindHistory: coSrc, KindObservation: readFile(t, "observation_seed.tmpl")} {
		b, err := os.ReadFile(filepath.Join(reg.Dir(), PromotedFile(kind)))
		if err != nil || string(b) != want {
			t.Errorf("%s: promoted file differs (%v)", kind, err)
		}
	}
	// Promoting must not confuse List: the promoted file is not a record.
	if len(list) != 4 {
		t.Errorf("List has %d records, want 4", len(list))
	}
}

func TestRegistryPutRepairedTwice(t *testing.T) {
	reg, err := OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jinja := readFile(t, "history_jinja.tmpl")
	first, _, err := reg.Put(Record{Kind: KindHistory, Source: "optimizer"}, jinja)
	if err != nil {
		t.Fatal(err)
	}
	_, stored, _ := reg.Get(first.ID)
	second, _, err := reg.Put(Record{Kind: KindHistory, Scores: map[string]float64{"success": 1}}, stored)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID || len(second.Validation.Repairs) == 0 || stored == jinja {
		t.Errorf("repaired source did not map to the same record with its repairs: %+v", second)
	}
}

// A template compiled once is stored with PutTemplate and scored with
// Score: neither parses or validates it again, and the record keeps the
// repairs of the one validation.
func TestRegistryPutTemplateAndScore(t *testing.T) {
	reg, err := OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jinja := readFile(t, "history_jinja.tmpl")
	tpl, rep := Validate(KindHistory, jinja)
	if tpl == nil || len(rep.Repairs) == 0 {
		t.Fatalf("fixture: %s", rep)
	}
	seed, _, err := reg.Put(Record{Kind: KindHistory, Source: "test"}, readFile(t, "history_seed.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reg.PutTemplate(Record{Kind: KindHistory, Parent: seed.ID, Step: StepUT, Round: 1, FeedbackIDs: []string{"fb-1"}, Source: "optimizer"}, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != rep.ID || !rec.Validation.OK || len(rec.Validation.Repairs) != len(rep.Repairs) || rec.Parent != seed.ID {
		t.Fatalf("stored: %+v", rec)
	}
	if _, src, err := reg.Get(rec.ID); err != nil || src != rep.Repaired {
		t.Fatalf("stored source %q, %v", src, err)
	}
	scored, err := reg.Score(rec.ID[:6], map[string]float64{"ut_objective": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if scored.Scores["ut_objective"] != 0.5 || scored.Parent != seed.ID || strings.Join(scored.FeedbackIDs, ",") != "fb-1" {
		t.Errorf("scored: %+v", scored)
	}
	if _, err := reg.PutTemplate(Record{Kind: KindObservation}, tpl); err == nil {
		t.Error("PutTemplate stored a history template as an observation guideline")
	}
	if _, err := reg.Score("h-000000000000", map[string]float64{"x": 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Score of an unknown id: %v", err)
	}
}
