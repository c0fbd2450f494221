// Package synth is PAACE-Syn (PAACE section 3): synthetic plan-structured
// workflows whose dual execution yields plan-aware compression pairs.
package synth

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaJSON is the workflow document's JSON Schema, the one home of its
// structural rules.
//
//go:embed schema/workflow.schema.json
var SchemaJSON []byte

// Workflow is one synthetic workflow.
type Workflow struct {
	ID     string `json:"id"`
	Domain string `json:"domain"`
	// Input is the noisy initial input: the facts the steps need mixed
	// with irrelevant and redundant material.
	Input string `json:"input"`
	// Plan is Π = [τ1 … τn], the instructions' step ids in order.
	Plan         []string      `json:"plan"`
	Instructions []Instruction `json:"instructions"`
	Output       OutputSpec    `json:"output"`
	Checker      Checker       `json:"checker"`
}

// Instruction is what the agent is told at one plan step.
type Instruction struct {
	Step string `json:"step"`
	Text string `json:"text"`
}

// OutputSpec says what the final output must be.
type OutputSpec struct {
	Spec string `json:"spec"`
}

// Checker holds the expected final output, the facts it must contain, or both.
type Checker struct {
	Expected string   `json:"expected,omitempty"`
	Facts    []string `json:"facts,omitempty"`
}

// Digest names w by its content: the digest of its canonical bytes (its
// JSON as this type writes it), so a workflow edited under the same id is
// another input, while a change of white space or key order is not.
func (w *Workflow) Digest() string {
	b, err := json.Marshal(w)
	if err != nil {
		panic("synth: marshal a workflow: " + err.Error()) // strings and slices only
	}
	return digest(b)
}

// digest is the one way synth names an input by its bytes (a workflow, an
// optimizer request): hex SHA-256.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Instruction returns the instruction of plan step i.
func (w *Workflow) Instruction(i int) Instruction {
	for _, in := range w.Instructions {
		if in.Step == w.Plan[i] {
			return in
		}
	}
	panic("synth: workflow not validated: plan step " + w.Plan[i] + " has no instruction")
}

// Problem is one reason a workflow is invalid, at a field given as a path
// such as "plan[2]" or "checker.facts" ("" is the whole document).
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// InvalidError lists why a workflow (or, with What set, something else)
// was rejected.
type InvalidError struct {
	What     string // "" for a workflow
	Problems []Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	what := e.What
	if what == "" {
		what = "workflow"
	}
	return "invalid " + what + ": " + strings.Join(parts, "; ")
}

var (
	schema  = mustCompile()
	printer = message.NewPrinter(language.English)
)

func mustCompile() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		panic("synth: embedded workflow schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	const url = "workflow.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		panic("synth: embedded workflow schema: " + err.Error())
	}
	s, err := c.Compile(url)
	if err != nil {
		panic("synth: embedded workflow schema: " + err.Error())
	}
	return s
}

// Parse reads one workflow document and validates it against the schema
// and the rules the schema cannot state. A rejection is an *InvalidError
// naming each offending field.
func Parse(data []byte) (Workflow, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return Workflow{}, &InvalidError{Problems: []Problem{{Message: "not JSON: " + err.Error()}}}
	}
	if err := schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Workflow{}, fmt.Errorf("validate workflow: %w", err)
		}
		return Workflow{}, &InvalidError{Problems: schemaProblems(ve)}
	}
	var w Workflow
	if err := json.Unmarshal(data, &w); err != nil {
		// The schema accepted it, so this is a mismatch between schema and type.
		return Workflow{}, fmt.Errorf("decode workflow: %w", err)
	}
	if ps := planProblems(&w); len(ps) > 0 {
		return Workflow{}, &InvalidError{Problems: ps}
	}
	return w, nil
}

// planProblems checks that the plan and the instructions name each other
// one to one.
func planProblems(w *Workflow) []Problem {
	var ps []Problem
	instr := make(map[string]int, len(w.Instructions))
	for i, in := range w.Instructions {
		if j, dup := instr[in.Step]; dup {
			ps = append(ps, Problem{fmt.Sprintf("instructions[%d].step", i), fmt.Sprintf("step %q already has instructions[%d]", in.Step, j)})
			continue
		}
		instr[in.Step] = i
	}
	inPlan := make(map[string]int, len(w.Plan))
	for i, s := range w.Plan {
		if j, dup := inPlan[s]; dup {
			ps = append(ps, Problem{fmt.Sprintf("plan[%d]", i), fmt.Sprintf("step %q is already plan[%d]", s, j)})
			continue
		}
		inPlan[s] = i
		if _, ok := instr[s]; !ok {
			ps = append(ps, Problem{fmt.Sprintf("plan[%d]", i), fmt.Sprintf("step %q refers to no instruction", s)})
		}
	}
	for i, in := range w.Instructions {
		if _, ok := inPlan[in.Step]; !ok && instr[in.Step] == i {
			ps = append(ps, Problem{fmt.Sprintf("instructions[%d].step", i), fmt.Sprintf("step %q is not in the plan", in.Step)})
		}
	}
	return ps
}

// schemaProblems flattens the validator's error tree into one problem per
// failed keyword, at the field it concerns.
func schemaProblems(ve *jsonschema.ValidationError) []Problem {
	var ps []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range req.Missing {
				ps = append(ps, Problem{fieldPath(append(append([]string(nil), e.InstanceLocation...), m)), "missing (required)"})
			}
			return
		}
		ps = append(ps, Problem{fieldPath(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)})
	}
	walk(ve)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Field < ps[j].Field })
	return ps
}

// fieldPath writes an instance location as the job-file style path
// a.b[2].c.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
