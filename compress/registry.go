package compress

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Name names a compression strategy.
type Name string

// GuidelineUse says how a strategy takes guideline templates.
type GuidelineUse int

const (
	// NoGuideline: the strategy compresses without guideline templates.
	NoGuideline GuidelineUse = iota
	// BuiltinGuideline: it compresses with its built-in prompts only.
	BuiltinGuideline
	// OptionalGuideline: with its built-in prompts unless the user gives a
	// guideline (file or registry id).
	OptionalGuideline
	// RequiredGuideline: with a guideline the user gives; the built-in
	// prompts serve the kind not given.
	RequiredGuideline
)

// Caps are what a strategy needs besides the tokenizer: consumers wire
// clients and check inputs by them, never by name.
type Caps struct {
	Guideline GuidelineUse
	// Compressor: it calls the compressor model.
	Compressor bool
	// Embedder: it calls (or may call, by its params) the embedder.
	Embedder bool
	// Plan: it conditions on the plan's next steps.
	Plan bool
}

// ModuleParams are a strategy's parameters as the job's compression
// section sets them: a YAML-tagged type whose Validate names each invalid
// field by its path (FieldError).
type ModuleParams interface {
	Validate() error
}

// Module is a registered strategy (Caddy's module registry is the model:
// each strategy file registers itself in init).
type Module struct {
	Name Name
	// Rank places the strategy in listings (the comparison table's order);
	// strategies without one follow the ranked ones, by name.
	Rank int
	// Doc is one line for help texts.
	Doc  string
	Caps Caps
	// Key is the key of its parameters in the job's compression section
	// ("" when it has none).
	Key string
	// Params returns its parameters set to their defaults (nil when Key is
	// "").
	Params func() ModuleParams
	// Prompts are its built-in prompt templates by kind (KindHistory,
	// KindObservation), for strategies that use guidelines.
	Prompts map[string]string
	// New builds the strategy from its validated parameters (of Params'
	// type) and the dependencies its Caps ask for.
	New func(p ModuleParams, d Deps) (*Strategy, error)
}

// UsesGuidelines tells the strategies that compress with guideline
// templates, built in or given.
func (m Module) UsesGuidelines() bool { return m.Caps.Guideline != NoGuideline }

var registry = struct {
	sync.RWMutex
	mods map[Name]Module
}{mods: map[Name]Module{}}

// Register adds a strategy; it panics on a second one of the same name or
// key, or on a module that could not be built, as init-time mistakes.
func Register(m Module) {
	switch {
	case m.Name == "" || m.New == nil:
		panic("compress: Register: a module needs a Name and New")
	case (m.Key == "") != (m.Params == nil):
		panic(fmt.Sprintf("compress: Register %s: Key and Params go together", m.Name))
	case m.Caps.Guideline == RequiredGuideline && len(m.Prompts) == 0:
		panic(fmt.Sprintf("compress: Register %s: a strategy that uses guidelines needs built-in prompts for the kind not given", m.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	for _, o := range registry.mods {
		if o.Name == m.Name || (m.Key != "" && (o.Key == m.Key || m.Key == keyStrategy)) {
			panic(fmt.Sprintf("compress: Register %s: name or key %q already taken", m.Name, m.Key))
		}
	}
	registry.mods[m.Name] = m
}

// Modules lists the registered strategies in listing order.
func Modules() []Module {
	registry.RLock()
	out := make([]Module, 0, len(registry.mods))
	for _, m := range registry.mods {
		out = append(out, m)
	}
	registry.RUnlock()
	slices.SortFunc(out, func(a, b Module) int {
		if (a.Rank == 0) != (b.Rank == 0) {
			if a.Rank == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(string(a.Name), string(b.Name)))
	})
	return out
}

// Names lists the registered strategies' names in listing order.
func Names() []Name {
	mods := Modules()
	out := make([]Name, len(mods))
	for i, m := range mods {
		out[i] = m.Name
	}
	return out
}

// Lookup returns the strategy named s; the error lists the known ones.
func Lookup(s string) (Module, error) {
	registry.RLock()
	m, ok := registry.mods[Name(s)]
	registry.RUnlock()
	if ok {
		return m, nil
	}
	names := Names()
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = string(n)
	}
	return Module{}, fmt.Errorf("unknown strategy %q: want one of %s", s, strings.Join(want, ", "))
}

// Help describes every registered strategy, one line each, for help
// texts.
func Help() string {
	var b strings.Builder
	for _, m := range Modules() {
		var needs []string
		if m.UsesGuidelines() {
			needs = append(needs, "guideline")
		}
		if m.Caps.Compressor {
			needs = append(needs, "compressor")
		}
		if m.Caps.Embedder {
			needs = append(needs, "embedder")
		}
		if m.Caps.Plan {
			needs = append(needs, "plan")
		}
		fmt.Fprintf(&b, "  %-12s %s", m.Name, m.Doc)
		if len(needs) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(needs, ", "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
