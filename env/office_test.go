package env

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// factRE reads the facts the office applications state.
var factRE = regexp.MustCompile(`The ([a-z ]+) of ([A-Z][a-z]+(?: [A-Z][a-z]+)?) is ([^.\n]+)\.`)

var slotFillRE = regexp.MustCompile(`\{\{([a-z ]+) of ([A-Za-z ]+)\}\}`)

// playPlan carries out a task's plan, filling each {{R of E}} slot from
// the facts seen so far (or with wrong when set), and returns the score and
// the episode.
func playPlan(t *testing.T, o *Office, task Task, wrong bool) (Score, *officeEpisode) {
	t.Helper()
	ctx := context.Background()
	e, err := o.Reset(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	ep := e.(*officeEpisode)
	facts := map[string]string{}
	for i, c := range ep.task.Plan {
		if got := len(ep.Plan()); got != len(ep.task.Plan)-i {
			t.Fatalf("before step %d: %d plan steps ahead, want %d", i+1, got, len(ep.task.Plan)-i)
		}
		args := map[string]string{}
		for k, v := range c.Args {
			args[k] = slotFillRE.ReplaceAllStringFunc(v, func(s string) string {
				m := slotFillRE.FindStringSubmatch(s)
				if wrong {
					return "X-0"
				}
				f, ok := facts[m[1]+"|"+m[2]]
				if !ok {
					t.Fatalf("%s step %d needs %s, not seen before", task.ID, i+1, s)
				}
				return f
			})
		}
		b, _ := json.Marshal(args)
		res, err := ep.Step(ctx, Action{Tool: c.Tool, Arguments: b})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(res.Observation, "error") {
			t.Fatalf("%s step %d: %s", task.ID, i+1, res.Observation)
		}
		for _, m := range factRE.FindAllStringSubmatch(res.Observation, -1) {
			facts[m[1]+"|"+m[2]] = m[3]
		}
		if res.Done {
			return *res.Score, ep
		}
	}
	t.Fatalf("%s: plan ended without done", task.ID)
	return Score{}, nil
}

func TestOffice(t *testing.T) {
	o, err := NewOffice()
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []string{"train", "test"} {
		ts, err := o.Tasks(split)
		if err != nil || len(ts) != 100 {
			t.Fatalf("%s: %d tasks, %v", split, len(ts), err)
		}
	}
	ts, _ := o.Tasks("train")
	kinds := map[string]bool{}
	for _, task := range ts[:6] {
		kind := o.byID[task.ID].Kind
		kinds[kind] = true
		t.Run(task.ID+"-"+kind, func(t *testing.T) {
			s, _ := playPlan(t, o, task, false)
			if !s.Success || s.EM != 1 {
				t.Errorf("plan with the facts read: %+v, want success", s)
			}
			s, _ = playPlan(t, o, task, true)
			if s.Success || s.EM != 0 {
				t.Errorf("plan with wrong facts: %+v, want every check failed", s)
			}
			if _, _, err := o.AgentPrompts(task); err != nil {
				t.Fatal(err)
			}
		})
	}
	if len(kinds) != 3 {
		t.Errorf("kinds %v, want meeting, report and trip", kinds)
	}
	sys, user, err := o.AgentPrompts(ts[0])
	if err != nil || !strings.Contains(sys, "{{meeting code of Budget Review}}") || !strings.Contains(user, "\nPlan:\n1. email_read {\"id\":") || !strings.Contains(user, "\n5. submit {}") {
		t.Errorf("prompts:\n%s\n---\n%s\n%v", sys, user, err)
	}
}

// TestOfficeLongOutputs: the replies later steps depend on are long, so
// compression fires on them.
func TestOfficeLongOutputs(t *testing.T) {
	o, err := NewOffice()
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := o.Tasks("test")
	ep, _ := o.Reset(context.Background(), ts[0])
	first := o.byID[ts[0].ID].Plan[0]
	b, _ := json.Marshal(first.Args)
	res, err := ep.Step(context.Background(), Action{Tool: first.Tool, Arguments: b})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(res.Observation)); n < 250 {
		t.Errorf("first step's reply has %d words, want a long application output", n)
	}
	for _, bad := range []Action{{Tool: "email_read", Arguments: json.RawMessage(`{"id": "m-0"}`)}, {Tool: "nope", Arguments: json.RawMessage(`{}`)}, {Tool: "email_send", Arguments: json.RawMessage(`[1]`)}} {
		if res, err := ep.Step(context.Background(), bad); err != nil || !strings.HasPrefix(res.Observation, "error") {
			t.Errorf("%s: %q, %v; want an error observation", bad.Tool, res.Observation, err)
		}
	}
}
