package compress

// None leaves the context as it is: the baseline every strategy is
// compared with.
const None Name = "none"

func init() {
	Register(Module{
		Name: None, Rank: 10, Doc: "no compression (the baseline)",
		New: func(ModuleParams, Deps) (*Strategy, error) { return &Strategy{}, nil },
	})
}
