package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/eval"
)

// NightlyConfig is nightly.yaml (jobs/nightly.example.yaml documents each
// key). Paths are relative to the working directory, as the job's are.
type NightlyConfig struct {
	// Job is the job file: models, environment and tasks, compression
	// thresholds and the optimizer's settings.
	Job string `yaml:"job"`
	// Sessions is serve's session_log.dir.
	Sessions string `yaml:"sessions"`
	// Registry is the guideline registry serve reads
	// (compression.registry); promotion writes there.
	Registry string `yaml:"registry"`
	// State keeps the cursor, each night's work and its report.
	State string `yaml:"state"`
	// Gate are the rules the best candidate must pass against the
	// promoted guideline (eval.ParseRule).
	Gate []string `yaml:"gate"`
	// ReplaySample is how many logged requests are replayed
	// (eval.DefaultReplaySample when 0).
	ReplaySample int `yaml:"replay_sample"`
	// Split is the job's task split the candidates are compared on.
	Split string `yaml:"split"`
	// RedactEmails also redacts e-mail addresses on import.
	RedactEmails bool `yaml:"redact_emails"`

	rules []eval.Rule
}

// LoadNightlyConfig reads and validates nightly.yaml strictly (unknown
// keys are errors).
func LoadNightlyConfig(path string) (*NightlyConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, invalid(fmt.Errorf("nightly config: %w", err))
	}
	c := &NightlyConfig{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid(fmt.Errorf("%s: empty; start from jobs/nightly.example.yaml", path))
		}
		return nil, invalid(fmt.Errorf("%s: %s (see jobs/nightly.example.yaml for the known keys)", path, strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	if err := c.Validate(); err != nil {
		return nil, invalid(fmt.Errorf("%s: %w", path, err))
	}
	return c, nil
}

// Validate fills the defaults and names every problem.
func (c *NightlyConfig) Validate() error {
	if c.Split == "" {
		c.Split = "test"
	}
	if c.ReplaySample == 0 {
		c.ReplaySample = eval.DefaultReplaySample
	}
	var probs []string
	for key, v := range map[string]string{"job": c.Job, "sessions": c.Sessions, "registry": c.Registry, "state": c.State} {
		if v == "" {
			probs = append(probs, key+": missing")
		}
	}
	if c.Split != "train" && c.Split != "test" {
		probs = append(probs, fmt.Sprintf("split: %q, want train or test", c.Split))
	}
	if c.ReplaySample < 1 || c.ReplaySample > 100000 {
		probs = append(probs, fmt.Sprintf("replay_sample: %d, want 1 to 100000", c.ReplaySample))
	}
	if len(c.Gate) == 0 {
		probs = append(probs, `gate: no rule; give at least one, e.g. "agreement >= -0.02"`)
	}
	c.rules = nil
	for i, s := range c.Gate {
		r, err := eval.ParseRule(s)
		if err != nil {
			probs = append(probs, fmt.Sprintf("gate[%d]: %v", i, err))
			continue
		}
		c.rules = append(c.rules, r)
	}
	if len(probs) > 0 {
		slices.Sort(probs)
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}
