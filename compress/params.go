package compress

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// FieldError is an invalid parameter, named by its path in the job file
// (compression.pace.tau).
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Msg }

// fieldErrors collects FieldErrors under prefix.
type fieldErrors struct {
	prefix string
	errs   []error
}

// check adds a problem with field (a path under prefix) unless ok.
func (f *fieldErrors) check(ok bool, field, format string, args ...any) {
	if ok {
		return
	}
	path := f.prefix
	if field != "" {
		path += "." + field
	}
	f.errs = append(f.errs, &FieldError{Field: path, Msg: fmt.Sprintf(format, args...)})
}

func (f *fieldErrors) err() error { return errors.Join(f.errs...) }

// Section is the job file's section that holds the strategies' parameters.
const Section = "compression"

// keyStrategy is the section's key of the default strategy.
const keyStrategy = "strategy"

// Params are the strategies' parameters in the job's compression section:
// the default strategy, and each registered strategy's parameters under
// its Key. A strategy the section leaves out takes its defaults.
type Params struct {
	// Strategy is what `optimize rollout` runs without --strategy.
	Strategy string
	// set holds the parameters decoded or asked for (Of), by strategy.
	set map[Name]ModuleParams
}

// For returns strategy name's parameters: the section's, else its
// defaults; nil when it has none. It does not change p.
func (p Params) For(name Name) ModuleParams {
	if v, ok := p.set[name]; ok {
		return v
	}
	if m, err := Lookup(string(name)); err == nil && m.Params != nil {
		return m.Params()
	}
	return nil
}

// Of is For, kept in p: changing the result changes p (for programs that
// build a job rather than read one).
func (p *Params) Of(name Name) ModuleParams {
	v := p.For(name)
	if _, ok := p.set[name]; !ok && v != nil {
		if p.set == nil {
			p.set = map[Name]ModuleParams{}
		}
		p.set[name] = v
	}
	return v
}

// Validate reports every invalid field by its path under compression
// (FieldErrors joined).
func (p Params) Validate() error {
	var errs []error
	if p.Strategy != "" {
		if _, err := Lookup(p.Strategy); err != nil {
			errs = append(errs, &FieldError{Field: Section + "." + keyStrategy, Msg: err.Error()})
		}
	}
	for _, m := range Modules() {
		if v := p.For(m.Name); v != nil {
			errs = append(errs, v.Validate())
		}
	}
	return errors.Join(errs...)
}

// section is the compression section's shape for a YAML or JSON codec:
// the owner's fields inline (thresholds, guidelines), the default strategy,
// then each strategy's parameters under its key, in listing order. It is
// built from the registry, so a registered strategy's key is a known field
// and every other key stays an error for a strict decoder.
func (p Params) section(own reflect.Value, params func(Name) ModuleParams) reflect.Value {
	fields := []reflect.StructField{
		{Name: "Own", Type: own.Type(), Tag: `yaml:",inline"`, Anonymous: true},
		{Name: "Strategy", Type: reflect.TypeFor[string](), Tag: `yaml:"strategy"`},
	}
	var mods []Module
	for _, m := range Modules() {
		if m.Key == "" {
			continue
		}
		mods = append(mods, m)
		tag := fmt.Sprintf(`yaml:%q`, m.Key)
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("M%d", len(mods)), Type: reflect.TypeOf(m.Params()), Tag: reflect.StructTag(tag)})
	}
	v := reflect.New(reflect.StructOf(fields)).Elem()
	v.Field(0).Set(own)
	v.Field(1).SetString(p.Strategy)
	for i, m := range mods {
		v.Field(2 + i).Set(reflect.ValueOf(params(m.Name)))
	}
	return v
}

// Decode decodes a compression section with unmarshal, a YAML decoder's
// (yaml.v3's obsolete Unmarshaler callback keeps the decoder's strictness
// and line numbers): own (a pointer to a struct) gets the owner's keys, p
// the rest, onto each strategy's defaults so that a key left out keeps its
// default and an explicit zero stays for Validate to judge.
func (p *Params) Decode(unmarshal func(any) error, own any) error {
	o := reflect.ValueOf(own).Elem()
	sec := p.section(o, p.Of)
	if err := unmarshal(sec.Addr().Interface()); err != nil {
		return err
	}
	o.Set(sec.Field(0))
	p.Strategy = sec.Field(1).String()
	return nil
}

// Encode is the value to marshal for the section: own's fields, then p's.
func (p Params) Encode(own any) any {
	return p.section(reflect.ValueOf(own), p.For).Interface()
}

// fingerprint is the canonical text of v.
func fingerprint(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func isHTTPURL(s string) bool {
	return len(s) > len("http://") && (s[:7] == "http://" || (len(s) > 8 && s[:8] == "https://"))
}
