package pipeline

import (
	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/report"
)

// The model notice of a report names the roles the embedded model played
// in the work reported. They are derived from what that work runs, not from
// the calls it made: a resumed run or evaluation reuses finished stages and
// rollouts without calling any model, yet their figures are still the
// embedded model's.

// use is the job's role name as the work calls it.
func (rt *Runtime) use(name string) report.Use {
	return report.Use{Role: name, Embedded: rt.Job.Roles.get(name).BaseURL == Embedded}
}

// agentUses are the roles an agent compressing with s calls: its own, and
// the compressor and embedder when s calls them (compress.Strategy). A
// compressor at compressorURL (an eval candidate's own endpoint, "" for the
// job's) is the embedded model when that URL says so.
func (rt *Runtime) agentUses(s *compress.Strategy, compressorURL string) []report.Use {
	out := []report.Use{rt.use(llm.RoleAgent)}
	if s == nil {
		return out
	}
	if s.CallsCompressor {
		u := rt.use(llm.RoleCompressor)
		if compressorURL != "" {
			u.Embedded = compressorURL == Embedded
		}
		out = append(out, u)
	}
	if s.CallsEmbedder {
		out = append(out, rt.use(llm.RoleEmbedder))
	}
	return out
}

// SynthEmbedded maps each role optimize synth may call to whether the
// embedded model answers it; synth's summaries name those called.
func (rt *Runtime) SynthEmbedded() map[string]bool {
	out := map[string]bool{}
	for _, r := range llm.Roles() {
		out[r] = rt.use(r).Embedded
	}
	return out
}
