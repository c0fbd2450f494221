package compress

// PlanAware conditions the compressor on the plan's next K steps (PAACE
// eq. 2).
const PlanAware Name = "plan-aware"

// DefaultPlanK is PAACE's window of plan steps.
const DefaultPlanK = 3

// PlanAwareParams are PAACE's (section 3): the next K plan steps.
type PlanAwareParams struct {
	K int `yaml:"k" json:"k"`
}

func (p *PlanAwareParams) Validate() error {
	f := fieldErrors{prefix: Section + ".plan_aware"}
	f.check(p.K >= 0, "k", "must not be negative (0 conditions on no plan step)")
	return f.err()
}

func init() {
	Register(Module{
		Name: PlanAware, Rank: 80, Doc: "the compressor conditioned on the plan's next k steps (PAACE)",
		Caps: Caps{Guideline: OptionalGuideline, Compressor: true, Plan: true},
		Key:  "plan_aware", Params: func() ModuleParams { return &PlanAwareParams{K: DefaultPlanK} },
		Prompts: map[string]string{
			KindHistory:     "history_plan_aware.tmpl",
			KindObservation: "observation_plan_aware.tmpl",
		},
		New: func(p ModuleParams, d Deps) (*Strategy, error) {
			return guidelineStrategy(PlanAware, d, p.(*PlanAwareParams).K)
		},
	})
}
