package compress

// Prompting compresses with the built-in naive prompts (ACON G.5, G.8 in
// our words), the starting point of guideline optimization.
const Prompting Name = "prompting"

// promptingPrompts are the naive prompts, which the guideline strategy
// also takes for the kind it is given no guideline of.
var promptingPrompts = map[string]string{
	KindHistory:     "history_prompting.tmpl",
	KindObservation: "observation_prompting.tmpl",
}

func init() {
	Register(Module{
		Name: Prompting, Rank: 50, Doc: "the compressor with the built-in naive prompts",
		Caps:    Caps{Guideline: BuiltinGuideline, Compressor: true},
		Prompts: promptingPrompts,
		New:     func(_ ModuleParams, d Deps) (*Strategy, error) { return guidelineStrategy(Prompting, d, -1) },
	})
}
