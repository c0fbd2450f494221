package compress

import "context"

// FIFO keeps the task and the last turns (ACON's FIFO baseline).
const FIFO Name = "fifo"

// DefaultFIFOKeep is ACON D.3's number of turns FIFO keeps.
const DefaultFIFOKeep = 5

// FIFOParams are FIFO's: the job file writes them as the number itself,
// compression.fifo_keep.
type FIFOParams struct {
	// Keep is the number of last turns kept.
	Keep int
}

func (p *FIFOParams) UnmarshalYAML(unmarshal func(any) error) error { return unmarshal(&p.Keep) }

func (p *FIFOParams) MarshalYAML() (any, error) { return p.Keep, nil }

func (p *FIFOParams) Validate() error {
	f := fieldErrors{prefix: Section + ".fifo_keep"}
	f.check(p.Keep > 0, "", "must be positive")
	return f.err()
}

func init() {
	Register(Module{
		Name: FIFO, Rank: 20, Doc: "keep the task and the last fifo_keep turns",
		Key:    "fifo_keep",
		Params: func() ModuleParams { return &FIFOParams{Keep: DefaultFIFOKeep} },
		New: func(p ModuleParams, _ Deps) (*Strategy, error) {
			keep := p.(*FIFOParams).Keep
			return &Strategy{History: fifo{keep: keep}, Params: fingerprint(map[string]int{"fifo_keep": keep})}, nil
		},
	})
}

// fifo keeps the task and the last keep turns (ACON's FIFO baseline).
type fifo struct{ keep int }

var _ History = fifo{}

func (f fifo) CompressHistory(_ context.Context, in Input) (Output, error) {
	cut := lastTurnsStart(in.History, f.keep)
	if cut <= in.Covered {
		return Unchanged(Input{Task: in.Task, History: in.History, Covered: in.Covered})
	}
	out := Output{Messages: withTask(in.Task, nil, in.History[cut:]), Covered: cut}
	first := in.stepAt(in.Covered)
	dropped := make([]int, 0, len(turnStarts(in.History[in.Covered:cut])))
	for i := range cap(dropped) {
		dropped = append(dropped, first+i)
	}
	out.Event = &Event{
		Kind: KindHistory, Step: in.Step, Strategy: FIFO,
		Levels: map[string][]int{"dropped": dropped},
	}
	return out, nil
}
