package env

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/datasets"
	"github.com/ctxopt/ctxopt/templates"
)

// Office is an OfficeBench-like environment (docs/office-environment.md):
// tasks across an email client, a calendar, files with spreadsheets and a
// contact book, each with an explicit plan and deterministic checks of the
// final state. Application replies are long; later plan steps need facts
// that only earlier replies show. It is safe for concurrent use. Like every
// environment it leaves the step limit to the agent loop
// (rollout.Agent.StepLimit), which ends an episode at the limit with
// Finish.
type Office struct {
	tasks   map[string][]OfficeTask
	byID    map[string]*OfficeTask
	version string
	content string // digest of the dataset's lines
}

var (
	_ Environment = (*Office)(nil)
	_ Configured  = (*Office)(nil)
	_ Planner     = (*officeEpisode)(nil)
)

// The dataset format: one OfficeTask per line of datasets/office's
// train.jsonl and test.jsonl, written by datasets/office/gen from these
// types.
type (
	// OfficeTask is a task with its application state, its explicit plan
	// and the checks of the final state.
	OfficeTask struct {
		ID          string        `json:"id"`
		Split       string        `json:"split"`
		Kind        string        `json:"kind"`
		Instruction string        `json:"instruction"`
		Plan        []OfficeCall  `json:"plan"`
		State       OfficeState   `json:"state"`
		Checks      []OfficeCheck `json:"checks"`
	}
	// OfficeCall is a plan step: a tool and its arguments.
	OfficeCall struct {
		Tool string            `json:"tool"`
		Args map[string]string `json:"args"`
	}
	// OfficeState is the applications' state at the start of a task.
	OfficeState struct {
		Emails   []OfficeEmail   `json:"emails"`
		Contacts []OfficeContact `json:"contacts"`
		Files    []OfficeFile    `json:"files"`
		Events   []OfficeEvent   `json:"events"`
	}
	// OfficeEvent is a calendar entry, field by field (title, date, time,
	// room, code, ...).
	OfficeEvent = map[string]string
	// OfficeEmail is a message of the inbox.
	OfficeEmail struct {
		ID      string `json:"id"`
		From    string `json:"from"`
		Subject string `json:"subject"`
		Body    string `json:"body"`
	}
	// OfficeContact is a card of the contact book.
	OfficeContact struct {
		Name  string `json:"name"`
		Title string `json:"title"`
		Card  string `json:"card"`
	}
	// OfficeFile is a file or spreadsheet.
	OfficeFile struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	// OfficeCheck passes when some record of App (calendar, sent, files)
	// has every field equal (case and surrounding blanks aside) and every
	// Contains text inside the named field.
	OfficeCheck struct {
		App      string              `json:"app"`
		Fields   map[string]string   `json:"fields"`
		Contains map[string][]string `json:"contains,omitempty"`
	}
)

// String renders a plan step as the agent sees it: `tool {json args}`.
func (c OfficeCall) String() string {
	b, _ := json.Marshal(c.Args)
	return c.Tool + " " + string(b)
}

var officeApps = map[string]bool{"calendar": true, "sent": true, "files": true}

// NewOffice loads the bundled office dataset.
func NewOffice() (*Office, error) {
	d := dataset{fsys: datasets.Office(), display: func(name string) string { return "datasets/office/" + name }, limits: DefaultLimits, sum: sha256.New()}
	o := &Office{tasks: map[string][]OfficeTask{}, byID: map[string]*OfficeTask{}}
	seen := map[string]bool{}
	for _, split := range []string{"train", "test"} {
		err := d.readLines(split+".jsonl", func(n int, line []byte) error {
			var t OfficeTask
			if err := decodeStrict(line, &t); err != nil {
				return err
			}
			if err := t.validate(split); err != nil {
				return err
			}
			if seen[t.ID] {
				return fmt.Errorf(`field "id": %q repeated`, t.ID)
			}
			seen[t.ID] = true
			o.tasks[split] = append(o.tasks[split], t)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for split := range o.tasks {
		for i := range o.tasks[split] {
			o.byID[o.tasks[split][i].ID] = &o.tasks[split][i]
		}
	}
	v, err := fs.ReadFile(d.fsys, "VERSION")
	if err != nil {
		return nil, fmt.Errorf("read dataset %s: %w", d.display("VERSION"), err)
	}
	o.version = "office:" + strings.TrimSpace(string(v))
	o.content = d.digest()
	return o, nil
}

func (t OfficeTask) validate(split string) error {
	switch {
	case t.ID == "":
		return errors.New(`field "id": missing or empty`)
	case t.Split != split:
		return fmt.Errorf(`field "split": %q in the %s file`, t.Split, split)
	case strings.TrimSpace(t.Instruction) == "":
		return errors.New(`field "instruction": missing or empty`)
	case len(t.Plan) == 0 || t.Plan[len(t.Plan)-1].Tool != "submit":
		return errors.New(`field "plan": must end with a submit step`)
	case len(t.Checks) == 0:
		return errors.New(`field "checks": missing or empty`)
	}
	for i, c := range t.Plan {
		if !slices.ContainsFunc(officeTools, func(s ToolSpec) bool { return s.Name == c.Tool }) {
			return fmt.Errorf(`field "plan"[%d]: unknown tool %q`, i, c.Tool)
		}
	}
	for i, c := range t.Checks {
		if !officeApps[c.App] || len(c.Fields) == 0 {
			return fmt.Errorf(`field "checks"[%d]: want app calendar, sent or files with fields, got %q`, i, c.App)
		}
	}
	return nil
}

// Name implements Environment.
func (o *Office) Name() string { return "office" }

// Version identifies the dataset.
func (o *Office) Version() string { return o.version }

// Settings names the dataset, version and content; the office environment
// has no option that changes its tasks or checks.
func (o *Office) Settings() string {
	return fmt.Sprintf("%s content=%s", o.version, o.content)
}

func officeTool(name, desc string, params ...string) ToolSpec {
	props := map[string]any{}
	for _, p := range params {
		props[p] = map[string]string{"type": "string"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": append([]string{}, params...)})
	return ToolSpec{Name: name, Description: desc, Parameters: b}
}

var officeTools = []ToolSpec{
	officeTool("email_list", "List the inbox: id, sender and subject of every message."),
	officeTool("email_read", "Read a message with the earlier messages of its thread.", "id"),
	officeTool("email_send", "Send an email.", "to", "subject", "body"),
	officeTool("calendar_list", "Show the calendar of a day (YYYY-MM-DD).", "date"),
	officeTool("calendar_create", "Create a calendar event.", "title", "date", "time", "room", "code"),
	officeTool("contacts_search", "Search the contact book by name; shows the matching cards and related people.", "name"),
	officeTool("files_list", "List the files."),
	officeTool("files_open", "Open a file or spreadsheet.", "name"),
	officeTool("files_write", "Write a text file.", "name", "content"),
	officeTool("submit", "Finish the task; the final state is checked."),
}

// Tools implements Environment.
func (o *Office) Tools() []ToolSpec { return officeTools }

// Tasks implements Environment.
func (o *Office) Tasks(split string) ([]Task, error) {
	ts, ok := o.tasks[split]
	if !ok {
		return nil, fmt.Errorf("unknown split %q: want train or test", split)
	}
	out := make([]Task, len(ts))
	for i, t := range ts {
		out[i] = Task{ID: t.ID, Split: t.Split, Prompt: t.Instruction}
	}
	return out, nil
}

// AgentPrompts renders the office prompts: the task's instruction and its
// plan, one `N. tool {args}` line per step.
func (o *Office) AgentPrompts(t Task) (system, user string, err error) {
	ot, ok := o.byID[t.ID]
	if !ok {
		return "", "", fmt.Errorf("office: unknown task %q", t.ID)
	}
	if system, err = templates.Render("office_system.tmpl", map[string]any{"slot_example": "{{meeting code of Budget Review}}"}); err != nil {
		return "", "", err
	}
	plan := make([]string, len(ot.Plan))
	for i, c := range ot.Plan {
		plan[i] = c.String()
	}
	user, err = templates.Render("office_task.tmpl", map[string]any{"instruction": ot.Instruction, "plan": plan})
	return strings.TrimSpace(system), strings.TrimSpace(user), err
}

// Reset starts an episode on a copy of the task's application state.
func (o *Office) Reset(_ context.Context, t Task) (Episode, error) {
	ot, ok := o.byID[t.ID]
	if !ok {
		return nil, fmt.Errorf("office: unknown task %q", t.ID)
	}
	ep := &officeEpisode{task: ot, files: map[string]string{}}
	for _, f := range ot.State.Files {
		ep.files[f.Name] = f.Content
	}
	for _, e := range ot.State.Events {
		ep.events = append(ep.events, maps.Clone(e))
	}
	return ep, nil
}

// officeEpisode is one run of a task; episodes are used by one goroutine.
type officeEpisode struct {
	task   *OfficeTask
	events []map[string]string
	sent   []map[string]string
	files  map[string]string
	// done counts the plan steps carried out, in order.
	done int
}

// Plan returns the plan steps not carried out yet.
func (ep *officeEpisode) Plan() []string {
	var out []string
	for _, c := range ep.task.Plan[ep.done:] {
		out = append(out, c.String())
	}
	return out
}

// Step runs one application call.
func (ep *officeEpisode) Step(_ context.Context, a Action) (StepResult, error) {
	var args map[string]string
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		return StepResult{Observation: "error: the arguments must be a JSON object of strings"}, nil
	}
	if ep.done < len(ep.task.Plan) && ep.task.Plan[ep.done].Tool == a.Tool {
		ep.done++
	}
	st := ep.task.State
	need := func(keys ...string) string {
		for _, k := range keys {
			if strings.TrimSpace(args[k]) == "" {
				return fmt.Sprintf("error: %s needs %q", a.Tool, k)
			}
		}
		return ""
	}
	var b strings.Builder
	switch a.Tool {
	case "email_list":
		for _, e := range st.Emails {
			fmt.Fprintf(&b, "%s  from %s  subject %s\n", e.ID, e.From, e.Subject)
		}
	case "email_read":
		if msg := need("id"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		i := slices.IndexFunc(st.Emails, func(e OfficeEmail) bool { return e.ID == args["id"] })
		if i < 0 {
			return StepResult{Observation: fmt.Sprintf("error: no message %q; email_list shows the ids", args["id"])}, nil
		}
		writeEmail(&b, st.Emails[i])
		// Mail clients show the thread: the two messages after it.
		for k := 1; k <= 2 && k < len(st.Emails); k++ {
			b.WriteString("\n---- earlier in this thread ----\n")
			writeEmail(&b, st.Emails[(i+k)%len(st.Emails)])
		}
	case "email_send":
		if msg := need("to", "subject", "body"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		ep.sent = append(ep.sent, map[string]string{"to": args["to"], "subject": args["subject"], "body": args["body"]})
		fmt.Fprintf(&b, "Sent to %s.", args["to"])
	case "calendar_list":
		if msg := need("date"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		n := 0
		for _, e := range ep.events {
			if e["date"] == args["date"] {
				n++
				fmt.Fprintf(&b, "%s %s  %s  %s\n  %s\n", e["date"], e["time"], e["title"], e["room"], e["notes"])
			}
		}
		if n == 0 {
			fmt.Fprintf(&b, "No events on %s.", args["date"])
		}
	case "calendar_create":
		if msg := need("title", "date", "time"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		ep.events = append(ep.events, map[string]string{"title": args["title"], "date": args["date"], "time": args["time"], "room": args["room"], "code": args["code"]})
		fmt.Fprintf(&b, "Created %s on %s at %s.", args["title"], args["date"], args["time"])
	case "contacts_search":
		if msg := need("name"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		// The whole book, matches first: contact apps list related people.
		cs := slices.Clone(st.Contacts)
		slices.SortStableFunc(cs, func(x, y OfficeContact) int {
			return boolInt(!strings.EqualFold(x.Name, args["name"])) - boolInt(!strings.EqualFold(y.Name, args["name"]))
		})
		for _, c := range cs {
			fmt.Fprintf(&b, "%s (%s)\n  %s\n", c.Name, c.Title, c.Card)
		}
	case "files_list":
		for _, name := range slices.Sorted(maps.Keys(ep.files)) {
			fmt.Fprintf(&b, "%s  %d bytes\n", name, len(ep.files[name]))
		}
	case "files_open":
		if msg := need("name"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		c, ok := ep.files[args["name"]]
		if !ok {
			return StepResult{Observation: fmt.Sprintf("error: no file %q; files_list shows the names", args["name"])}, nil
		}
		b.WriteString(c)
	case "files_write":
		if msg := need("name", "content"); msg != "" {
			return StepResult{Observation: msg}, nil
		}
		ep.files[args["name"]] = args["content"]
		fmt.Fprintf(&b, "Wrote %s.", args["name"])
	case "submit":
		s := ep.Finish(context.Background())
		return StepResult{Observation: "Submitted.", Done: true, Score: &s}, nil
	default:
		return StepResult{Observation: fmt.Sprintf("error: unknown tool %q", a.Tool)}, nil
	}
	return StepResult{Observation: strings.TrimRight(b.String(), "\n")}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func writeEmail(b *strings.Builder, e OfficeEmail) {
	fmt.Fprintf(b, "Message %s\nFrom: %s\nSubject: %s\n\n%s\n", e.ID, e.From, e.Subject, e.Body)
}

// Finish runs the checks on the final state: success when all pass; EM
// is the share that pass.
func (ep *officeEpisode) Finish(context.Context) Score {
	passed := 0
	for _, c := range ep.task.Checks {
		if ep.passes(c) {
			passed++
		}
	}
	frac := float64(passed) / float64(len(ep.task.Checks))
	return Score{Success: passed == len(ep.task.Checks), EM: frac, F1: frac}
}

func (ep *officeEpisode) passes(c OfficeCheck) bool {
	var records []map[string]string
	switch c.App {
	case "calendar":
		records = ep.events
	case "sent":
		records = ep.sent
	case "files":
		for name, content := range ep.files {
			records = append(records, map[string]string{"name": name, "content": content})
		}
	}
	norm := func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
	return slices.ContainsFunc(records, func(r map[string]string) bool {
		for k, v := range c.Fields {
			if norm(r[k]) != norm(v) {
				return false
			}
		}
		for k, subs := range c.Contains {
			for _, s := range subs {
				if !strings.Contains(norm(r[k]), norm(s)) {
					return false
				}
			}
		}
		return true
	})
}
