package compress

// Guideline compresses with a guideline the user gives (a file or a
// registry id): what optimization produces and serve runs.
const Guideline Name = "guideline"

func init() {
	Register(Module{
		Name: Guideline, Rank: 60, Doc: "the compressor with a given guideline (--guideline FILE)",
		Caps:    Caps{Guideline: RequiredGuideline, Compressor: true},
		Prompts: promptingPrompts,
		New:     func(_ ModuleParams, d Deps) (*Strategy, error) { return guidelineStrategy(Guideline, d, -1) },
	})
}
