package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/templates"
)

// acePrompt renders the reflector's or curator's template with bullets
// and feedback items (id, step, outcome, lost facts, rules).
func acePrompt(t *testing.T, name string, bullets []string, items ...map[string]any) string {
	t.Helper()
	block, err := templates.Render("ace_feedback.tmpl", map[string]any{"feedback": items})
	if err != nil {
		t.Fatal(err)
	}
	out, err := templates.Render(name, map[string]any{"kind": "history", "bullets": bullets, "feedback": block, "budget": 512})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	failedItem    = map[string]any{"id": "fb1", "step": "ut", "outcome": "failed", "lost": []string{"The capital of Ostrel is Vell."}, "rules": []string{"Copy word for word every sentence that answers a task question."}}
	succeededItem = map[string]any{"id": "fb2", "step": "co", "outcome": "succeeded", "rules": []string{"Write REASONING as one sentence."}}
	aceBullets    = []string{
		"[keep-00001] helpful=0 harmful=0 :: Copy every fact sentence word for word.",
		"[style-00002] helpful=0 harmful=0 :: Paraphrase the facts to save space.",
		"[style-00003] helpful=0 harmful=0 :: Be friendly.",
	}
)

func TestReflectorTags(t *testing.T) {
	tags := func(items ...map[string]any) map[string]string {
		out, err := reflect(acePrompt(t, "ace_reflector.tmpl", aceBullets, items...))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Tags []struct{ ID, Tag string } `json:"bullet_tags"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, x := range r.Tags {
			m[x.ID] = x.Tag
		}
		return m
	}
	got := tags(failedItem, succeededItem)
	want := map[string]string{"keep-00001": "helpful", "style-00002": "harmful"}
	if len(got) != len(want) || got["keep-00001"] != want["keep-00001"] || got["style-00002"] != want["style-00002"] {
		t.Errorf("tags %v, want %v (a bullet the compressor ignores gets none)", got, want)
	}
	if got := tags(); len(got) != 0 {
		t.Errorf("no feedback: tags %v", got)
	}
	if _, err := reflect("no playbook here"); err == nil {
		t.Error("a prompt without the playbook markers was answered")
	}
}

func TestCuratorProposes(t *testing.T) {
	ops := func(bullets []string, items ...map[string]any) []string {
		out, err := curate(acePrompt(t, "ace_curator.tmpl", bullets, items...))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Ops []struct {
				Type, Section, ID, Content string
				IDs                        []string
			} `json:"operations"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, o := range r.Ops {
			s = append(s, strings.Join(strings.Fields(o.Type+" "+o.Section+" "+o.ID+" "+strings.Join(o.IDs, ",")+" "+o.Content), " "))
		}
		return s
	}
	tagged := []string{
		"[keep-00001] helpful=2 harmful=0 :: Copy every fact sentence word for word.",
		"[style-00002] helpful=0 harmful=1 :: Paraphrase the facts to save space.",
		"[keep-00003] helpful=1 harmful=0 :: Keep every fact sentence word for word.",
	}
	got := strings.Join(ops(tagged, failedItem, succeededItem), "\n")
	want := strings.Join([]string{
		"REMOVE style-00002",
		"MERGE keep-00001,keep-00003",
		"ADD keep Copy word for word every sentence that answers a task question.",
		"ADD trim Write REASONING as one sentence.",
	}, "\n")
	if got != want {
		t.Errorf("operations:\n%s\nwant:\n%s", got, want)
	}
	if got := ops(tagged); len(got) != 0 {
		t.Errorf("no feedback: operations %q, want none", got)
	}
	if got := ops(append(tagged, "[keep-00004] helpful=0 harmful=0 :: Write REASONING as one sentence."), succeededItem); strings.Contains(strings.Join(got, "\n"), "ADD") {
		t.Errorf("a rule the playbook already holds was added again: %q", got)
	}
}

func TestPlaybookBulletsAreRules(t *testing.T) {
	playbook := "Summarize.\n" + templates.PlaybookBegin + "\n## style\n[style-00001] helpful=0 harmful=3 :: Paraphrase the facts to save space.\n" + templates.PlaybookEnd + "\n"
	if got := Understood(playbook); len(got) != 1 || got[0] != "paraphrase facts" {
		t.Errorf("Understood(playbook) = %q, want the bullet's rule", got)
	}
	if got := Understood("Summarize.\n## style\n[style-00001] helpful=0 harmful=3 paraphrase the facts\n"); len(got) != 0 {
		t.Errorf("a line that is no bullet was read as its rule: %q", got)
	}
}
