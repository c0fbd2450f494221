package guideline

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
)

// fixedPlaybook is the playbook every operation test starts from.
func fixedPlaybook(t *testing.T) *Playbook {
	t.Helper()
	frame, err := os.ReadFile("testdata/history_seed.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	pb, err := NewPlaybook(KindHistory, string(frame))
	if err != nil {
		t.Fatal(err)
	}
	pb.Bullets = []Bullet{
		{ID: "keep-00001", Section: "keep", Content: "Copy every fact sentence word for word.", Helpful: 3, Round: 1, Changed: 2, Evidence: []string{"fb-a"}},
		{ID: "keep-00002", Section: "keep", Content: "Record the ids and amounts a later step reads.", Helpful: 1, Harmful: 1, Round: 1, Changed: 1},
		{ID: "drop-00003", Section: "drop", Content: "Paraphrase the facts to save space.", Harmful: 2, Round: 2, Changed: 2, Evidence: []string{"fb-b"}},
		{ID: "keep-00004", Section: "keep", Content: "Keep the searches issued so far.", Helpful: 1, Round: 2, Changed: 3},
	}
	pb.Next = 5
	if _, err := pb.Compile(); err != nil {
		t.Fatal(err)
	}
	return pb
}

func words(s string) int { return len(strings.Fields(s)) }

func dump(t *testing.T, pb *Playbook, record any) string {
	t.Helper()
	rec, err := json.MarshalIndent(record, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return pb.Block() + "\n" + string(rec) + "\n"
}

func TestPlaybookOperations(t *testing.T) {
	long := strings.Repeat("x", MaxBulletChars+1)
	tests := []struct {
		name string
		ops  []Op
	}{
		{"add", []Op{{Type: OpAdd, Section: "format", Content: "Quote each answer on its own line.", Evidence: []string{"fb-c"}}}},
		{"update", []Op{{Type: OpUpdate, ID: "keep-00002", Content: "Record ids, paths and amounts exactly as written.", Evidence: []string{"fb-d"}}}},
		{"remove", []Op{{Type: OpRemove, ID: "drop-00003", Evidence: []string{"fb-b"}}}},
		{"merge", []Op{{Type: OpMerge, IDs: []string{"keep-00004", "keep-00001"}, Content: "Copy every fact sentence and search word for word.", Evidence: []string{"fb-e"}}}},
		{"rejected", []Op{
			{Type: OpUpdate, ID: "keep-00099", Content: "x"},
			{Type: OpAdd, Section: "keep", Content: "   "},
			{Type: OpAdd, Section: "keep", Content: long},
			{Type: OpAdd, Section: "keep", Content: "Keep {{ history }} twice."},
			{Type: OpAdd, Section: "Keep Facts", Content: "Keep facts."},
			{Type: OpMerge, IDs: []string{"keep-00001"}},
			{Type: OpMerge, IDs: []string{"keep-00001", "nope-00001"}},
			{Type: "REWRITE", Content: "everything"},
			{Type: OpAdd, Section: "keep", Content: "Copy every fact sentence word for word."},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pb := fixedPlaybook(t)
			before := pb.Source()
			applied := pb.Apply(4, tt.ops)
			if _, err := pb.Compile(); err != nil {
				t.Fatalf("the playbook after %s fails validation: %v", tt.name, err)
			}
			if tt.name == "rejected" {
				for _, a := range applied {
					if a.Rejected == "" {
						t.Errorf("op %+v was applied, want rejected", a.Op)
					}
				}
				if pb.Source() != before {
					t.Error("rejected ops changed the playbook")
				}
			}
			golden.Check(t, "playbook/op_"+tt.name+".txt", dump(t, pb, applied))
		})
	}
}

func TestPlaybookTags(t *testing.T) {
	pb := fixedPlaybook(t)
	rej := pb.ApplyTags(5, []Tag{{ID: "drop-00003", Tag: TagHarmful, Evidence: []string{"fb-x"}}, {ID: "keep-00001", Tag: TagHelpful}, {ID: "keep-00002", Tag: TagNeutral}, {ID: "gone-00001", Tag: TagHelpful}, {ID: "keep-00001", Tag: "great"}})
	b, _ := pb.Get("drop-00003")
	if b.Harmful != 3 || b.Changed != 5 || !strings.Contains(strings.Join(b.Evidence, ","), "fb-x") {
		t.Errorf("drop-00003 = %+v, want harmful 3, changed 5, evidence fb-x", b)
	}
	if k, _ := pb.Get("keep-00002"); k.Changed != 1 {
		t.Errorf("a neutral tag changed keep-00002: %+v", k)
	}
	if len(rej) != 2 {
		t.Errorf("rejected %q, want the unknown id and the unknown verdict", rej)
	}
}

func TestPlaybookEvictionOrder(t *testing.T) {
	pb := fixedPlaybook(t)
	// Ties on net (keep-00002: 0, keep-00004: -1, keep-00001: -3) are
	// broken by staleness and age; drop-00003 (net +2) goes first.
	pb.Bullets = append(pb.Bullets, Bullet{ID: "keep-00005", Section: "keep", Content: "Note the failed attempts.", Round: 1, Changed: 1})
	pb.Next = 6
	full := pb.Tokens(words)
	evicted, err := pb.Budget(full-1, words)
	if err != nil {
		t.Fatal(err)
	}
	all := pb.Clone()
	all.Bullets = fixedPlaybook(t).Bullets
	all.Bullets = append(all.Bullets, Bullet{ID: "keep-00005", Section: "keep", Content: "Note the failed attempts.", Round: 1, Changed: 1})
	order, err := all.Budget((&Playbook{}).Tokens(words), words)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range order {
		ids = append(ids, e.Bullet)
	}
	if got, want := strings.Join(ids, " "), "drop-00003 keep-00002 keep-00005 keep-00004 keep-00001"; got != want {
		t.Errorf("eviction order %s, want %s", got, want)
	}
	if pb.Tokens(words) > full-1 || len(evicted) != 1 {
		t.Errorf("budget %d: %d tokens left after %d evictions", full-1, pb.Tokens(words), len(evicted))
	}
	if _, err := pb.Budget(1, words); err == nil {
		t.Error("a budget below the empty playbook was accepted")
	}
	golden.Check(t, "playbook/evict.txt", dump(t, all, order))
}

// at returns a vectorizer giving the i-th text the i-th vector.
func at(vs ...[]float64) Vectorizer {
	return func(texts []string) ([][]float64, error) {
		if len(texts) != len(vs) {
			return nil, fmt.Errorf("%d texts, %d vectors", len(texts), len(vs))
		}
		return vs, nil
	}
}

func TestPlaybookDedupThreshold(t *testing.T) {
	unit := func(c float64) []float64 { return []float64{c, math.Sqrt(1 - c*c), 0} }
	for _, tt := range []struct {
		name   string
		cosine float64
		merged bool
	}{
		{"at", DefaultDedupThreshold, true},
		{"below", DefaultDedupThreshold - 0.001, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pb := fixedPlaybook(t)
			// keep-00004 is near keep-00001; drop-00003 is in another
			// section and equal to keep-00001, so never a duplicate of it.
			got, err := pb.Dedup(6, at([]float64{1, 0, 0}, []float64{0, 0, 1}, []float64{1, 0, 0}, unit(tt.cosine)), DefaultDedupThreshold)
			if err != nil {
				t.Fatal(err)
			}
			if tt.merged != (len(got) == 1) {
				t.Fatalf("cosine %.3f: merged %+v, want merged=%v", tt.cosine, got, tt.merged)
			}
			golden.Check(t, "playbook/dedup_"+tt.name+".txt", dump(t, pb, got))
		})
	}
}

func TestLexicalDedup(t *testing.T) {
	pb := fixedPlaybook(t)
	pb.Apply(5, []Op{{Type: OpAdd, Section: "keep", Content: "copy every fact sentence word for word"}})
	got, err := pb.Dedup(5, LexicalVectors, DefaultDedupThreshold)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kept != "keep-00001" || got[0].Dropped != "keep-00005" {
		t.Errorf("lexical dedup %+v, want keep-00005 folded into keep-00001", got)
	}
}

func TestMergePlaybooks(t *testing.T) {
	a, b := fixedPlaybook(t), fixedPlaybook(t)
	a.Apply(3, []Op{{Type: OpAdd, Section: "format", Content: "Quote each answer on its own line."}})
	b.ApplyTags(3, []Tag{{ID: "keep-00001", Tag: TagHelpful}, {ID: "drop-00003", Tag: TagHarmful}})
	b.Apply(3, []Op{
		{Type: OpAdd, Section: "format", Content: "List pending questions last."},          // same id as a's, other rule
		{Type: OpAdd, Section: "keep", Content: "Copy every fact sentence word for word!"}, // a duplicate
	})
	m, rep, err := MergePlaybooks(a, b, MergeOptions{Round: 4, Vectors: LexicalVectors, Threshold: DefaultDedupThreshold, MaxTokens: 120, Count: words})
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := m.Get("keep-00001"); k.Helpful != 7 {
		t.Errorf("keep-00001 helpful %d, want 3+4 summed", k.Helpful)
	}
	if m.Tokens(words) > 120 {
		t.Errorf("merged playbook has %d tokens, budget 120", m.Tokens(words))
	}
	golden.Check(t, "playbook/merge.txt", dump(t, m, rep))
	c := fixedPlaybook(t)
	c.Frame += "\nAlso keep it short.\n"
	if _, _, err := MergePlaybooks(a, c, MergeOptions{Vectors: LexicalVectors, Threshold: 0.9}); err == nil {
		t.Error("playbooks of different frames merged")
	}
}

func TestPlaybookRegistry(t *testing.T) {
	reg, err := OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pb := fixedPlaybook(t)
	rec, tpl, err := reg.PutPlaybook(Record{Step: StepSeed, Source: "test"}, pb)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Validation.OK || tpl.Source() != pb.Source() {
		t.Fatalf("stored %+v", rec)
	}
	_, got, err := reg.Playbook(rec.ID[:6])
	if err != nil {
		t.Fatal(err)
	}
	if got.Source() != pb.Source() {
		t.Error("the stored playbook does not render to its guideline")
	}
	recs, err := reg.List()
	if err != nil || len(recs) != 1 {
		t.Errorf("List = %d records, %v; the bullets file must not count as a guideline", len(recs), err)
	}
	plain, _, err := reg.Put(Record{Kind: KindHistory, Source: "test"}, pb.Frame)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Playbook(plain.ID); err == nil {
		t.Error("a plain guideline read as a playbook")
	}
}

func TestParsePlaybook(t *testing.T) {
	pb := fixedPlaybook(t)
	got, err := ParsePlaybook(KindHistory, pb.Source())
	if err != nil {
		t.Fatal(err)
	}
	if got.Source() != pb.Source() || got.Next != 5 || len(got.Bullets) != 4 {
		t.Fatalf("parsed %d bullets, next %d; source equal %v", len(got.Bullets), got.Next, got.Source() == pb.Source())
	}
	if b, _ := got.Get("drop-00003"); b.Section != "drop" || b.Harmful != 2 {
		t.Errorf("drop-00003 parsed as %+v", b)
	}
	for name, src := range map[string]string{
		"no block":     pb.Frame,
		"edited block": strings.Replace(pb.Source(), "helpful=3", "helpful=3  extra", 1),
	} {
		if _, err := ParsePlaybook(KindHistory, src); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := NewPlaybook(KindHistory, pb.Source()); err == nil {
		t.Error("a playbook was taken as a frame")
	}
}
