package eval

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
)

// Spec is a candidate as the user wrote it:
// NAME=STRATEGY[,guideline=FILE|ID][,compressor=URL][,compressor_model=MODEL].
// The guideline is a file or a registry id; the compressor keys point the
// candidate's compressor at another endpoint (a student against its
// teacher).
type Spec struct {
	Name            string        `json:"name"`
	Text            string        `json:"spec"`
	Strategy        compress.Name `json:"strategy"`
	Guideline       string        `json:"guideline,omitempty"`
	CompressorURL   string        `json:"compressor_url,omitempty"`
	CompressorModel string        `json:"compressor_model,omitempty"`
}

// Spec keys after the strategy.
const (
	keyGuideline       = "guideline"
	keyCompressor      = "compressor"
	keyCompressorModel = "compressor_model"
)

// nameRE keeps names usable as directory names and in reports.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

const specForm = "NAME=STRATEGY[,guideline=FILE|ID][,compressor=URL][,compressor_model=MODEL]"

// ParseSpec parses one --candidate value.
func ParseSpec(s string) (Spec, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return Spec{}, fmt.Errorf("candidate %q: want %s", s, specForm)
	}
	if !nameRE.MatchString(name) {
		return Spec{}, fmt.Errorf("candidate %q: name %q must be 1-64 letters, digits, '.', '_' or '-'", s, name)
	}
	parts := strings.Split(rest, ",")
	mod, err := compress.Lookup(parts[0])
	if err != nil {
		return Spec{}, fmt.Errorf("candidate %q: %w", s, err)
	}
	st := mod.Name
	sp := Spec{Name: name, Text: s, Strategy: st}
	seen := map[string]bool{}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return Spec{}, fmt.Errorf("candidate %q: %q is not key=value (keys: guideline, compressor, compressor_model)", s, kv)
		}
		if seen[k] {
			return Spec{}, fmt.Errorf("candidate %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case keyGuideline:
			sp.Guideline = v
		case keyCompressor:
			sp.CompressorURL = v
		case keyCompressorModel:
			sp.CompressorModel = v
		default:
			return Spec{}, fmt.Errorf("candidate %q: unknown key %q (keys: guideline, compressor, compressor_model)", s, k)
		}
	}
	switch caps := mod.Caps; {
	case caps.Guideline == compress.RequiredGuideline && sp.Guideline == "":
		return Spec{}, fmt.Errorf("candidate %q: strategy %s needs guideline=FILE or a registry id", s, st)
	case !mod.UsesGuidelines() && sp.Guideline != "":
		return Spec{}, fmt.Errorf("candidate %q: strategy %s uses no guideline; drop guideline= or use strategy %s", s, st, compress.Guideline)
	case !caps.Compressor && (sp.CompressorURL != "" || sp.CompressorModel != ""):
		return Spec{}, fmt.Errorf("candidate %q: strategy %s calls no compressor; drop the compressor keys", s, st)
	}
	return sp, nil
}

// ParseSpecs parses every --candidate value; names must be unique.
func ParseSpecs(ss []string) ([]Spec, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("no candidate: give --candidate %s at least once", specForm)
	}
	out := make([]Spec, 0, len(ss))
	names := map[string]string{}
	for _, s := range ss {
		sp, err := ParseSpec(s)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[sp.Name]; dup {
			return nil, fmt.Errorf("two candidates are named %q (%q and %q); names must be unique", sp.Name, prev, s)
		}
		names[sp.Name] = s
		out = append(out, sp)
	}
	return out, nil
}
