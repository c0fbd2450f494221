package pipeline

import (
	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/synth"
)

// synthHistoryThreshold makes the teacher compress at every step that has
// an older turn to fold (PAACE section 3: compression at every step).
const synthHistoryThreshold = 1

// SynthTeacherSource reads the teacher prompt of optimize synth: file
// when given, else the built-in plan-aware history prompt.
func SynthTeacherSource(file string) (src, origin string, err error) {
	if file == "" {
		return startingGuideline(&Job{}, guideline.KindHistory, prompts(compress.PlanAware))
	}
	b, err := guideline.ReadSource(file)
	if err != nil {
		return "", "", invalid(err)
	}
	return string(b), "file:" + file, nil
}

// SynthTeacher compiles the teacher prompt of optimize synth (see
// SynthTeacherSource).
func SynthTeacher(file string) (*compress.Prompt, error) {
	src, origin, err := SynthTeacherSource(file)
	if err != nil {
		return nil, err
	}
	t, err := Compile(guideline.KindHistory, src, origin)
	if err != nil {
		return nil, invalid(err)
	}
	return promptOf(t), nil
}

// SynthExecutor returns the dual executor of optimize synth run and evolve:
// the agent, and the plan-aware strategy with teacher (k from the job's
// compression.plan_aware.k) compressing the history at every step, every
// role metered by meter.
func (rt *Runtime) SynthExecutor(teacher *compress.Prompt, meter *Meter) (*synth.Executor, error) {
	s, err := compress.New(compress.PlanAware, rt.Job.Compression.For(compress.PlanAware), compress.Deps{
		Compressor: meter.Wrap(rt.Compressor), Tokenizer: rt.Tokenizer,
		History: teacher, HistoryThreshold: synthHistoryThreshold,
	})
	if err != nil {
		return nil, invalid(err)
	}
	return &synth.Executor{
		Agent: meter.Wrap(rt.Agent), Tokenizer: rt.Tokenizer, Teacher: s,
		Judge: meter.Wrap(rt.Judge), Embedder: meter.Wrap(rt.Embedder),
		StepLimit: rt.Job.Env.StepLimit, Threshold: *rt.Job.Synth.Accept.Threshold,
		Embedded: rt.SynthEmbedded(),
		Models:   rt.Models(llm.RoleAgent, llm.RoleCompressor, llm.RoleJudge, llm.RoleEmbedder),
	}, nil
}
