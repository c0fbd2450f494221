package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/internal/splitmix"
	"github.com/ctxopt/ctxopt/templates"
)

// The generator writes PAACE-Syn workflows (docs/embedded-model.md,
// "Generator"): it reads the directive lines of the generation prompt and
// builds a workflow whose facts and questions are in the forms the agent
// and compressors of this model read, so the workflows it writes can be
// executed by it.

var errNoDirectives = errors.New("generator prompt lacks the " + strings.Join([]string{templates.WorkflowIDKey, templates.DomainKey, templates.StepsKey, templates.NoiseKey}, ", ") + " lines (see docs/embedded-model.md, Generator)")

// genDomain is the vocabulary of one domain: entities, relations with the
// kind of value each takes, filler lines and the heading of an input line.
type genDomain struct {
	entities []string
	rels     []genRel
	fillers  []string
	heading  func(i int, r *splitmix.RNG) string
}

type genRel struct {
	name string
	kind int // one of the value kinds below
}

const (
	valDate = iota
	valRoom
	valPerson
	valFile
	valNumber
	valID
)

var (
	firstNames = []string{"Ana", "Bram", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"}
	lastNames  = []string{"Ruiz", "Okafor", "Lind", "Park", "Novak", "Sato", "Weber", "Costa", "Haddad", "Moreau"}
	fileWords  = []string{"forecast", "roster", "minutes", "budget", "inventory", "survey", "roadmap", "ledger"}
)

var genDomains = map[string]genDomain{
	"office": {
		entities: []string{"Vendor Sync", "Budget Review", "Hiring Panel", "Launch Retro", "Board Prep", "Security Audit", "Offsite Planning", "Quarterly Close"},
		rels:     []genRel{{"date", valDate}, {"room", valRoom}, {"organizer", valPerson}, {"agenda file", valFile}, {"deadline", valDate}},
		fillers: []string{
			"The cafeteria closes early on Fridays.", "Please remember to lock your screen.",
			"The newsletter has a new crossword this week.", "Parking on level two is being repainted.",
			"This message was sent from a mobile device.", "The printer on floor three is out of toner.",
		},
		heading: func(i int, r *splitmix.RNG) string {
			return fmt.Sprintf("Mail %d from %s %s.", i+1, firstNames[r.Intn(len(firstNames))], lastNames[r.Intn(len(lastNames))])
		},
	},
	"research-qa": {
		entities: []string{"Varn River", "Mount Oskel", "Lake Tiram", "Halvard Institute", "Corran Bridge", "Ostel Observatory", "Brenn Valley", "Sarel Library"},
		rels:     []genRel{{"length", valNumber}, {"founder", valPerson}, {"elevation", valNumber}, {"opening year", valNumber}, {"catalog code", valID}},
		fillers: []string{
			"Several travel guides describe the region as scenic.", "The article was last edited by an anonymous user.",
			"Citation needed.", "Local legends about the area vary widely.",
			"See also the list of regional landmarks.", "The photograph in this section is in the public domain.",
		},
		heading: func(i int, _ *splitmix.RNG) string { return fmt.Sprintf("Source %d.", i+1) },
	},
	"report-extraction": {
		entities: []string{"Halden Ltd", "Brisk Freight", "Norvik Labs", "Pellam Supplies", "Tamsin Foods", "Orrin Metals", "Keld Logistics", "Mirow Textiles"},
		rels:     []genRel{{"invoice total", valNumber}, {"invoice date", valDate}, {"account manager", valPerson}, {"contract id", valID}, {"payment terms", valNumber}},
		fillers: []string{
			"Record imported from the legacy system.", "No remarks.", "Duplicate check pending.",
			"Field audit completed without findings.", "Scanned copy attached.", "Entered by the night batch.",
		},
		heading: func(i int, _ *splitmix.RNG) string { return fmt.Sprintf("Record %d.", 100+i) },
	},
}

// generatorDomains are the domains the generator knows, sorted.
func generatorDomains() []string { return slices.Sorted(maps.Keys(genDomains)) }

type genWorkflow struct {
	ID           string           `json:"id"`
	Domain       string           `json:"domain"`
	Input        string           `json:"input"`
	Plan         []string         `json:"plan"`
	Instructions []genInstruction `json:"instructions"`
	Output       struct {
		Spec string `json:"spec"`
	} `json:"output"`
	Checker struct {
		Facts []string `json:"facts"`
	} `json:"checker"`
}

type genInstruction struct {
	Step string `json:"step"`
	Text string `json:"text"`
}

type genDirectives struct {
	id, domain string
	steps      int
	noise      float64
}

func parseGenDirectives(prompt string) (genDirectives, error) {
	var d genDirectives
	var err error
	seen := 0
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case templates.WorkflowIDKey:
			d.id, seen = val, seen|1
		case templates.DomainKey:
			d.domain, seen = val, seen|2
		case templates.StepsKey:
			if d.steps, err = strconv.Atoi(val); err != nil || d.steps < 1 {
				return d, fmt.Errorf("generator prompt: %s %q is not a positive count", templates.StepsKey, val)
			}
			seen |= 4
		case templates.NoiseKey:
			if d.noise, err = strconv.ParseFloat(val, 64); err != nil || d.noise < 0 || d.noise >= 1 {
				return d, fmt.Errorf("generator prompt: %s %q is not a share in [0, 1)", templates.NoiseKey, val)
			}
			seen |= 8
		}
	}
	if seen != 15 {
		return d, errNoDirectives
	}
	if _, ok := genDomains[d.domain]; !ok {
		return d, fmt.Errorf("generator prompt: unknown domain %q; want one of %s", d.domain, strings.Join(generatorDomains(), ", "))
	}
	return d, nil
}

// generate writes the workflow the prompt's directives ask for. Everything
// it draws comes from the directives, so the same prompt gives the same
// workflow at temperature 0, and variation changes it.
func generate(prompt string, variation uint64) (string, error) {
	d, err := parseGenDirectives(prompt)
	if err != nil {
		return "", err
	}
	dom := genDomains[d.domain]
	r := splitmix.New(vary(hashStrings("generator", d.id, d.domain, strconv.Itoa(d.steps), strconv.FormatFloat(d.noise, 'g', -1, 64)), variation))
	// Needed facts: distinct (relation, entity) pairs, one per step.
	type pair struct{ rel, ent int }
	maxPairs := len(dom.rels) * len(dom.entities)
	n := min(d.steps, maxPairs)
	used := map[pair]bool{}
	// fresh draws a pair not drawn before; the caller makes sure one is left.
	fresh := func() pair {
		for {
			p := pair{r.Intn(len(dom.rels)), r.Intn(len(dom.entities))}
			if !used[p] {
				used[p] = true
				return p
			}
		}
	}
	needed := make([]pair, n)
	for i := range needed {
		needed[i] = fresh()
	}
	sentence := func(p pair, val string) string {
		return fmt.Sprintf("The %s of %s is %s.", dom.rels[p.rel].name, dom.entities[p.ent], val)
	}
	w := genWorkflow{ID: d.id, Domain: d.domain}
	var lines []string
	answers := make([]string, n)
	for i, p := range needed {
		answers[i] = genValue(dom.rels[p.rel].kind, r)
		step := "t" + strconv.Itoa(i+1)
		w.Plan = append(w.Plan, step)
		w.Instructions = append(w.Instructions, genInstruction{step, fmt.Sprintf("What is the %s of %s?", dom.rels[p.rel].name, dom.entities[p.ent])})
		lines = append(lines, sentence(p, answers[i]))
	}
	// Noise: a share d.noise of the input's lines are distractor facts
	// (other pairs), filler, or repeats of a needed fact.
	noise := int(math.Round(float64(n) * d.noise / (1 - d.noise)))
	for range noise {
		switch k := r.Intn(5); {
		case k < 2 && len(used) < maxPairs:
			p := fresh()
			lines = append(lines, sentence(p, genValue(dom.rels[p.rel].kind, r)))
		case k < 4:
			lines = append(lines, dom.fillers[r.Intn(len(dom.fillers))])
		default:
			i := r.Intn(n)
			lines = append(lines, sentence(needed[i], answers[i]))
		}
	}
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(dom.heading(i, r) + " " + l + "\n")
	}
	w.Input = strings.TrimRight(b.String(), "\n")
	w.Output.Spec = "One line per plan step, in plan order: the step id, a colon and the answer."
	w.Checker.Facts = answers
	return marshalJSON(w)
}

func genValue(kind int, r *splitmix.RNG) string {
	switch kind {
	case valDate:
		return fmt.Sprintf("2024-%02d-%02d", r.Between(1, 12), r.Between(1, 28))
	case valRoom:
		return fmt.Sprintf("Room %d%c", r.Between(1, 9), 'A'+rune(r.Intn(6)))
	case valPerson:
		return firstNames[r.Intn(len(firstNames))] + " " + lastNames[r.Intn(len(lastNames))]
	case valFile:
		return fileWords[r.Intn(len(fileWords))] + "-" + strconv.Itoa(r.Between(1, 99)) + ".xlsx"
	case valID:
		return fmt.Sprintf("C-%05d", r.Intn(100000))
	default:
		return strconv.Itoa(r.Between(10, 9999))
	}
}
