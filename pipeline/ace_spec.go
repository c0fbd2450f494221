package pipeline

import (
	"fmt"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
)

// The optimizers a job may choose (job field optimizer).
const (
	OptimizerACON = "acon" // whole-guideline rewrites, UT then CO (the default)
	OptimizerACE  = "ace"  // playbooks grown by delta operations
)

// ACE modes: offline passes over the train split (epochs), online updates
// after every N new trajectories.
const (
	ACEOffline = "offline"
	ACEOnline  = "online"
)

// Dedup vectors: the embedder role's, or the pure-Go lexical fallback.
const (
	DedupEmbedder = "embedder"
	DedupLexical  = "lexical"
)

// ACESpec is the job's ace section: how the ACE optimizer runs.
type ACESpec struct {
	Mode string `yaml:"mode" json:"mode"`
	// Epochs are the offline passes over the train split, one round each.
	Epochs int `yaml:"epochs" json:"epochs"`
	// Every is how many new trajectories an online round reads.
	Every int `yaml:"every" json:"every"`
	// DedupThreshold is the cosine at or above which two bullets of a
	// section merge; Dedup says whose vectors: the embedder role's by
	// default, lexical when the job configures no embedder.
	DedupThreshold float64 `yaml:"dedup_threshold" json:"dedup_threshold"`
	Dedup          string  `yaml:"dedup" json:"dedup"`
	// MaxTokens is the hard budget of the playbook's bullets, counted with
	// the project's tokenizer.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens"`
	// Gate are eval gate rules a delta batch must pass against the
	// playbook without it on the held-out selection tasks.
	Gate []string `yaml:"gate" json:"gate"`
}

// Defaults of the ace section.
const (
	DefaultACEEpochs    = 2
	DefaultACEEvery     = 8
	DefaultACEMaxTokens = 1024
	maxACEEpochs        = 20
	maxACETokens        = 1 << 16
)

// DefaultACEGate keeps a batch unless it loses: the 95% paired interval
// of its success minus the playbook's without it must not fall below 0.
var DefaultACEGate = []string{"success >= 0"}

// WithDefaults fills the zero fields.
func (s ACESpec) WithDefaults() ACESpec {
	if s.Mode == "" {
		s.Mode = ACEOffline
	}
	if s.Epochs == 0 {
		s.Epochs = DefaultACEEpochs
	}
	if s.Every == 0 {
		s.Every = DefaultACEEvery
	}
	if s.DedupThreshold == 0 {
		s.DedupThreshold = guideline.DefaultDedupThreshold
	}
	if s.Dedup == "" {
		s.Dedup = DedupEmbedder
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = DefaultACEMaxTokens
	}
	if len(s.Gate) == 0 {
		s.Gate = DefaultACEGate
	}
	return s
}

// ACEProblem is one invalid value of the ace section, Field relative to it.
type ACEProblem struct{ Field, Message string }

// Problems lists what is wrong with the (defaulted) section.
func (s ACESpec) Problems() []ACEProblem {
	var ps []ACEProblem
	add := func(field, format string, args ...any) {
		ps = append(ps, ACEProblem{field, fmt.Sprintf(format, args...)})
	}
	if s.Mode != ACEOffline && s.Mode != ACEOnline {
		add("mode", "unknown mode %q; want %s (epochs over the train split) or %s (an update every N trajectories)", s.Mode, ACEOffline, ACEOnline)
	}
	if s.Epochs < 1 || s.Epochs > maxACEEpochs {
		add("epochs", "%d is out of range; want 1 to %d", s.Epochs, maxACEEpochs)
	}
	if s.Every < 1 {
		add("every", "%d is out of range; want 1 or more trajectories", s.Every)
	}
	if !(s.DedupThreshold > 0 && s.DedupThreshold <= 1) {
		add("dedup_threshold", "%g is out of range; want a cosine above 0 and at most 1", s.DedupThreshold)
	}
	if s.Dedup != DedupEmbedder && s.Dedup != DedupLexical {
		add("dedup", "unknown %q; want %s (the embedder role) or %s (pure-Go word overlap)", s.Dedup, DedupEmbedder, DedupLexical)
	}
	if s.MaxTokens < 16 || s.MaxTokens > maxACETokens {
		add("max_tokens", "%d is out of range; want 16 to %d", s.MaxTokens, maxACETokens)
	}
	for i, r := range s.Gate {
		if _, err := eval.ParseRule(r); err != nil {
			add(fmt.Sprintf("gate[%d]", i), "%v", err)
		}
	}
	return ps
}

// rules parses the gate, checked by Problems.
func (s ACESpec) rules() []eval.Rule {
	out := make([]eval.Rule, 0, len(s.Gate))
	for _, r := range s.Gate {
		if rule, err := eval.ParseRule(r); err == nil {
			out = append(out, rule)
		}
	}
	return out
}

// projectACE estimates the ACE rounds over n train tasks: per round, the
// seed's or the round's playbook on every train task, the batch on the
// held-out part of about the baseline's successes, an analysis of about
// every other task, and one reflector and one curator call (billed at the
// optimizer's prices, whose endpoint they take unless set).
func projectACE(job *Job, n float64) (agent, comp, opt use) {
	s := job.ACE
	rounds := float64(s.Epochs)
	if s.Mode == ACEOnline {
		rounds = float64((int(n) + s.Every - 1) / s.Every)
	}
	hist := float64(job.Compression.History.Threshold)
	steps := float64(job.Env.StepLimit) / 2
	for range int(rounds) {
		a, k := rolloutUse(job, job.Optimize.UTHoldout*0.7*n+n, true)
		agent.add(a)
		comp.add(k)
		opt.add(use{n/2 + 2, n * hist * steps / 3, n*400 + 2*float64(s.MaxTokens)})
	}
	return agent, comp, opt
}
