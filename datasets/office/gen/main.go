// Command gen writes the bundled office dataset (datasets/office): tasks
// over an email client, a calendar, files and spreadsheets and a contact
// book, each with its application state, an explicit plan and the checks
// of the final state (docs/office-environment.md).
//
// The output depends only on the flags: the same seed gives byte-identical
// files.
//
//	go run ./datasets/office/gen -seed 42 -out datasets/office -train 100 -test 100
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/datagen"
	"github.com/ctxopt/ctxopt/internal/splitmix"
)

// datasetVersion changes when the generator's output format or content
// rules change; the seed and counts are appended as build metadata.
const datasetVersion = "1.0.0"

type config = datagen.Config

func main() {
	var cfg config
	cfg.Flags(flag.CommandLine, "datasets/office")
	flag.Parse()
	os.Exit(datagen.Main(cfg.Out, func() (map[string][]byte, error) { return generate(cfg) }))
}

// The task format is env's (env.OfficeTask), so the generator writes what
// env.NewOffice reads.
type (
	task    = env.OfficeTask
	call    = env.OfficeCall
	state   = env.OfficeState
	email   = env.OfficeEmail
	contact = env.OfficeContact
	file    = env.OfficeFile
	event   = env.OfficeEvent
	check   = env.OfficeCheck
)

func generate(cfg config) (map[string][]byte, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	g := &gen{r: splitmix.New(cfg.Seed), used: map[string]bool{}}
	out := map[string][]byte{}
	for _, s := range []struct {
		name string
		n    int
	}{{"train", cfg.Train}, {"test", cfg.Test}} {
		var b bytes.Buffer
		for i := range s.n {
			t := g.task(fmt.Sprintf("office-%s-%04d", s.name, i+1), s.name, i)
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(t); err != nil {
				return nil, err
			}
		}
		out[s.name+".jsonl"] = b.Bytes()
	}
	out["VERSION"] = []byte(cfg.Version(datasetVersion) + "\n")
	return out, nil
}

type gen struct {
	r    *splitmix.RNG
	used map[string]bool // names handed out in the current task
}

var (
	firstNames = []string{"Dana", "Priya", "Marco", "Lena", "Omar", "Ines", "Tariq", "Mei", "Jonas", "Aisha", "Pavel", "Rosa", "Kenji", "Nadia", "Felix", "Hana", "Diego", "Sofia", "Emeka", "Greta"}
	lastNames  = []string{"Whitfield", "Natarajan", "Okafor", "Lindqvist", "Haddad", "Moreau", "Tanaka", "Kowalski", "Alvarez", "Brennan", "Castillo", "Sorensen", "Yilmaz", "Fontaine", "Mbeki", "Novak", "Petrov", "Quinlan", "Romano", "Varga"}
	adjectives = []string{"Budget", "Harbor", "Summit", "Cedar", "Atlas", "Beacon", "Falcon", "Granite", "Juniper", "Meridian", "Orchid", "Pioneer", "Quartz", "Riverside", "Sterling", "Willow"}
	nouns      = []string{"Review", "Audit", "Launch", "Offsite", "Workshop", "Rollout", "Kickoff", "Summit", "Planning", "Briefing"}
	cities     = []string{"Lisbon", "Oslo", "Dublin", "Porto", "Krakow", "Vienna", "Seville", "Tallinn", "Bergen", "Lyon"}
	regions    = []string{"Northwind", "Eastgate", "Southmere", "Westbrook", "Highfield", "Lowmoor", "Redcliff", "Greenvale", "Stonebridge", "Clearwater", "Ashford", "Brightwater"}
	hotels     = []string{"Aurora", "Meridian", "Belvedere", "Harborview", "Solstice", "Lanterna", "Corvin", "Azalea"}
	titles     = []string{"finance lead", "office manager", "project lead", "sales director", "travel coordinator", "engineering manager", "legal counsel", "facilities lead"}
)

// officeFiller is what real mail and documents are mostly made of. It
// states no fact in the `the R of E is A.` shape and uses none of the
// embedded compressor's directive words.
var officeFiller = []string{
	"Thanks again for the quick turnaround on the last round of comments.",
	"I have copied the wider team so everyone sees the same version.",
	"Please let me know if anything here looks off before Friday.",
	"The facilities team asked us to confirm numbers a day ahead.",
	"As discussed on the call, the draft agenda is still open for edits.",
	"We should circulate the slides early so people can read them beforehand.",
	"Catering will follow the usual order unless someone flags an allergy.",
	"The vendor sent a revised quote, which I attached for reference.",
	"Parking on site is limited, so public transport is the better option.",
	"I will be travelling on Tuesday and slower to reply than usual.",
	"Legal reviewed the wording and had no further comments.",
	"The shared drive folder has the older versions if anyone needs them.",
	"Remember that the quarterly numbers are still provisional.",
	"Let us aim to wrap up the open items before the end of the month.",
	"The projector in the small meeting rooms has been unreliable lately.",
	"Could you forward this to anyone I may have missed.",
	"The finance team will send the final figures once they close the books.",
	"I booked the usual video link as a fallback for remote colleagues.",
	"Feedback from the last session was positive overall.",
	"We can revisit the timeline once the approvals come through.",
}

func (g *gen) pick(xs []string) string { return splitmix.Pick(g.r, xs) }

// fresh returns a name built by f that no earlier call returned.
func (g *gen) fresh(f func() string) string {
	for {
		if s := f(); !g.used[s] {
			g.used[s] = true
			return s
		}
	}
}

func (g *gen) person() string {
	return g.fresh(func() string { return g.pick(firstNames) + " " + g.pick(lastNames) })
}

func (g *gen) project() string {
	return g.fresh(func() string { return g.pick(adjectives) + " " + g.pick(nouns) })
}

func (g *gen) code(prefix string) string {
	return fmt.Sprintf("%s%d%c-%02d", prefix, g.r.Between(1, 9), 'A'+rune(g.r.Intn(26)), g.r.Between(10, 99))
}

func (g *gen) phone() string { return fmt.Sprintf("555-%04d", g.r.Between(100, 9999)) }

// filler returns n filler sentences.
func (g *gen) filler(n int) []string {
	var out []string
	for _, i := range g.r.Perm(len(officeFiller))[:n] {
		out = append(out, officeFiller[i])
	}
	return out
}

// body mixes facts into filler at random places.
func (g *gen) body(facts []string, n int) string {
	s := g.filler(n)
	for _, f := range facts {
		at := g.r.Intn(len(s) + 1)
		s = append(s[:at], append([]string{f}, s[at:]...)...)
	}
	return strings.Join(s, " ")
}

func (g *gen) date() string {
	return fmt.Sprintf("2025-%02d-%02d", g.r.Between(1, 12), g.r.Between(1, 28))
}

func (g *gen) clock() string {
	return fmt.Sprintf("%02d:%s", g.r.Between(8, 17), g.pick([]string{"00", "30"}))
}

// inbox builds n emails, the one at index at holding facts; the others
// hold distractor facts about other projects.
func (g *gen) inbox(n, at int, from, subject string, facts []string) ([]email, string) {
	var es []email
	id := ""
	for i := range n {
		e := email{ID: fmt.Sprintf("m-%03d", 100+g.r.Intn(900)+i*1000), From: g.person()}
		if i == at {
			e.From, e.Subject, e.Body = from, subject, g.body(facts, 9)
			id = e.ID
		} else {
			p := g.project()
			e.Subject = p
			e.Body = g.body([]string{
				fmt.Sprintf("The meeting code of %s is %s.", p, g.code("K")),
				fmt.Sprintf("The room of %s is Room %d%c.", p, g.r.Between(1, 9), 'A'+rune(g.r.Intn(6))),
			}, 7)
		}
		es = append(es, e)
	}
	return es, id
}

// contacts builds the contact book: the people named, and others.
func (g *gen) contacts(people map[string]string, extra int) []contact {
	var cs []contact
	card := func(name, phone string) contact {
		t := g.pick(titles)
		return contact{Name: name, Title: t, Card: fmt.Sprintf("%s, %s. The phone of %s is %s. %s",
			name, t, name, phone, strings.Join(g.filler(2), " "))}
	}
	for _, name := range sortedKeys(people) {
		cs = append(cs, card(name, people[name]))
	}
	for range extra {
		cs = append(cs, card(g.person(), g.phone()))
	}
	g.r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	return cs
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func slot(rel, ent string) string { return "{{" + rel + " of " + ent + "}}" }

// task builds task i of a split; kinds rotate so each split has all three.
func (g *gen) task(id, split string, i int) task {
	// Names are unique within a task, which is all the checks need.
	clear(g.used)
	switch i % 3 {
	case 0:
		return g.meeting(id, split)
	case 1:
		return g.report(id, split)
	}
	return g.trip(id, split)
}

// meeting: read the organiser's email (code, room), look up a contact's
// phone, schedule the meeting, mail the code and phone on.
func (g *gen) meeting(id, split string) task {
	proj, organiser, host, to := g.project(), g.person(), g.person(), g.person()
	code, room, phone := g.code("K"), fmt.Sprintf("Room %d%c", g.r.Between(1, 9), 'A'+rune(g.r.Intn(6))), g.phone()
	date, clock := g.date(), g.clock()
	emails, mid := g.inbox(5, g.r.Intn(5), organiser, proj, []string{
		fmt.Sprintf("The meeting code of %s is %s.", proj, code),
		fmt.Sprintf("The room of %s is %s.", proj, room),
		fmt.Sprintf("%s will host the session.", host),
	})
	body := fmt.Sprintf("Meeting code %s. Call %s on %s.", slot("meeting code", proj), host, slot("phone", host))
	return task{
		ID: id, Split: split, Kind: "meeting",
		Instruction: fmt.Sprintf("%s sent the details of the %s. Schedule it on %s at %s with its room and meeting code, then email %s the meeting code and the phone number of the host, %s.",
			organiser, proj, date, clock, to, host),
		Plan: []call{
			{Tool: "email_read", Args: map[string]string{"id": mid}},
			{Tool: "contacts_search", Args: map[string]string{"name": host}},
			{Tool: "calendar_create", Args: map[string]string{"title": proj, "date": date, "time": clock, "room": slot("room", proj), "code": slot("meeting code", proj)}},
			{Tool: "email_send", Args: map[string]string{"to": to, "subject": proj, "body": body}},
			{Tool: "submit", Args: map[string]string{}},
		},
		State: state{Emails: emails, Contacts: g.contacts(map[string]string{host: phone, to: g.phone()}, 4), Events: g.events(date, 3)},
		Checks: []check{
			{App: "calendar", Fields: map[string]string{"title": proj, "date": date, "time": clock, "room": room, "code": code}},
			{App: "sent", Fields: map[string]string{"to": to}, Contains: map[string][]string{"body": {code, phone}}},
		},
	}
}

// report: open a spreadsheet (a region's total), read the approval email,
// write the summary file, mail the total.
func (g *gen) report(id, split string) task {
	sheet := strings.ToLower(g.pick(adjectives)) + fmt.Sprintf("_q%d_sales.csv", g.r.Between(1, 4))
	regs := g.r.Perm(len(regions))[:10]
	target := regions[regs[g.r.Intn(len(regs))]]
	var rows []string
	total := ""
	rows = append(rows, "region,units,returns,total")
	var lines []string
	for _, k := range regs {
		t := fmt.Sprintf("%d", g.r.Between(10000, 99999))
		if regions[k] == target {
			total = t
		}
		rows = append(rows, fmt.Sprintf("%s,%d,%d,%s", regions[k], g.r.Between(100, 999), g.r.Between(1, 60), t))
		lines = append(lines, fmt.Sprintf("The quarterly total of %s is %s.", regions[k], t))
	}
	content := strings.Join(rows, "\n") + "\n\nNotes. " + strings.Join(lines, " ") + " " + strings.Join(g.filler(3), " ")
	report := g.project()
	approval, approver, boss := g.code("AP"), g.person(), g.person()
	emails, mid := g.inbox(5, g.r.Intn(5), approver, report+" approval", []string{
		fmt.Sprintf("The approval number of %s is %s.", report, approval),
	})
	out := strings.ToLower(strings.ReplaceAll(report, " ", "_")) + "_summary.txt"
	return task{
		ID: id, Split: split, Kind: "report",
		Instruction: fmt.Sprintf("Open the spreadsheet %s and find the quarterly total of %s. %s approved the %s by email. Write %s with the total and the approval number, then email %s the total.",
			sheet, target, approver, report, out, boss),
		Plan: []call{
			{Tool: "files_open", Args: map[string]string{"name": sheet}},
			{Tool: "email_read", Args: map[string]string{"id": mid}},
			{Tool: "files_write", Args: map[string]string{"name": out, "content": fmt.Sprintf("%s total %s, approval %s.", target, slot("quarterly total", target), slot("approval number", report))}},
			{Tool: "email_send", Args: map[string]string{"to": boss, "subject": report, "body": fmt.Sprintf("The quarterly total for %s is %s.", target, slot("quarterly total", target))}},
			{Tool: "submit", Args: map[string]string{}},
		},
		State: state{Emails: emails, Contacts: g.contacts(map[string]string{boss: g.phone()}, 3),
			Files: []file{{Name: sheet, Content: content}, {Name: "notes.txt", Content: strings.Join(g.filler(6), " ")}}},
		Checks: []check{
			{App: "files", Fields: map[string]string{"name": out}, Contains: map[string][]string{"content": {total, approval}}},
			{App: "sent", Fields: map[string]string{"to": boss}, Contains: map[string][]string{"body": {total}}},
		},
	}
}

// trip: read the travel email (flight, hotel), check the day's calendar,
// block the trip, mail the details.
func (g *gen) trip(id, split string) task {
	trip := g.fresh(func() string { return g.pick(cities) + " Trip" })
	flight, hotel := g.code("TP"), "Hotel "+g.pick(hotels)
	agent, to := g.person(), g.person()
	date, clock := g.date(), g.clock()
	emails, mid := g.inbox(5, g.r.Intn(5), agent, trip+" booking", []string{
		fmt.Sprintf("The flight number of %s is %s.", trip, flight),
		fmt.Sprintf("The hotel of %s is %s.", trip, hotel),
	})
	return task{
		ID: id, Split: split, Kind: "trip",
		Instruction: fmt.Sprintf("%s booked the %s. Check the calendar for %s, add the trip at %s with the hotel as its room and the flight number as its code, then email %s the flight number and the hotel.",
			agent, trip, date, clock, to),
		Plan: []call{
			{Tool: "email_read", Args: map[string]string{"id": mid}},
			{Tool: "calendar_list", Args: map[string]string{"date": date}},
			{Tool: "calendar_create", Args: map[string]string{"title": trip, "date": date, "time": clock, "room": slot("hotel", trip), "code": slot("flight number", trip)}},
			{Tool: "email_send", Args: map[string]string{"to": to, "subject": trip, "body": fmt.Sprintf("Flight %s, staying at %s.", slot("flight number", trip), slot("hotel", trip))}},
			{Tool: "submit", Args: map[string]string{}},
		},
		State: state{Emails: emails, Contacts: g.contacts(map[string]string{to: g.phone()}, 3), Events: g.events(date, 6)},
		Checks: []check{
			{App: "calendar", Fields: map[string]string{"title": trip, "date": date, "time": clock, "room": hotel, "code": flight}},
			{App: "sent", Fields: map[string]string{"to": to}, Contains: map[string][]string{"body": {flight, hotel}}},
		},
	}
}

// events fills the calendar of date with n meetings of other projects.
func (g *gen) events(date string, n int) []event {
	var es []event
	for range n {
		p := g.project()
		es = append(es, event{"title": p, "date": date, "time": g.clock(),
			"room":  fmt.Sprintf("Room %d%c", g.r.Between(1, 9), 'A'+rune(g.r.Intn(6))),
			"notes": strings.Join(g.filler(2), " ")})
	}
	return es
}
