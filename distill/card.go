package distill

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/ctxopt/ctxopt/redact"
)

//go:embed templates
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	// yq quotes a YAML scalar: a JSON string is a valid YAML one.
	"yq": func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	},
	// md keeps a value from breaking a Markdown table or code span.
	"md":   func(s string) string { return strings.NewReplacer("|", `\|`, "`", "'", "\n", " ").Replace(s) },
	"join": strings.Join,
	"pct":  func(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" },
	"f1":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"f3":   func(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) },
}).ParseFS(templateFS, "templates/*.tmpl"))

type cardSplit struct {
	Name  string
	Rows  int
	Stats SplitStats
	Files []cardFile // one a registered format
}

type cardFile struct{ Path, Description string }

// cardConfig is a 🤗 datasets configuration: a format's files of the
// non-empty splits.
type cardConfig struct {
	Name  string
	Files []struct{ Split, Path string }
}

type namedCount struct {
	Name  string
	Count int
}

type cardData struct {
	Title        string
	License      string
	SizeCategory string
	Manifest     *Manifest
	// Splits are the non-empty splits, which the configurations list;
	// AllSplits every split, for the tables.
	Splits, AllSplits []cardSplit
	EmptySplits       []string
	Configs           []cardConfig
	Dropped, Redacted []namedCount
}

type recipeData struct {
	MaxLength     int
	Seed          int
	HasValidation bool
}

func newCardData(m *Manifest) cardData {
	title := "ctxopt compressor distillation"
	if m.Job != "" {
		title += ": " + m.Job
	}
	d := cardData{Title: title, License: m.License, Manifest: m}
	total := 0
	for _, name := range splitNames {
		st := m.Splits[name]
		cs := cardSplit{Name: name, Rows: st.Rows, Stats: st}
		for _, f := range Formats() {
			cs.Files = append(cs.Files, cardFile{filepath.ToSlash(f.Format.Path(name)), f.Description})
		}
		d.AllSplits = append(d.AllSplits, cs)
		if st.Rows > 0 {
			d.Splits = append(d.Splits, cs)
		} else {
			d.EmptySplits = append(d.EmptySplits, name)
		}
		total += st.Rows
	}
	d.SizeCategory = sizeCategory(total)
	for _, f := range Formats() {
		if f.Config == "" {
			continue
		}
		c := cardConfig{Name: f.Config}
		for _, sp := range d.Splits {
			c.Files = append(c.Files, struct{ Split, Path string }{sp.Name, filepath.ToSlash(f.Format.Path(sp.Name))})
		}
		d.Configs = append(d.Configs, c)
	}
	for _, r := range DropReasons() {
		if n := m.Rows.Dropped[r]; n > 0 {
			d.Dropped = append(d.Dropped, namedCount{r, n})
		}
	}
	for _, k := range redact.Kinds() {
		if n := m.Redactions[k]; n > 0 {
			d.Redacted = append(d.Redacted, namedCount{k, n})
		}
	}
	return d
}

// licenseTexts are the texts of licenses often chosen for datasets, by
// their Hugging Face identifier: a card with one of them links its text
// even when no --license-link was given.
var licenseTexts = map[string]string{
	"apache-2.0":          "https://www.apache.org/licenses/LICENSE-2.0",
	"mit":                 "https://opensource.org/license/mit",
	"bsd-3-clause":        "https://opensource.org/license/bsd-3-clause",
	"cc-by-4.0":           "https://creativecommons.org/licenses/by/4.0/",
	"cc-by-sa-4.0":        "https://creativecommons.org/licenses/by-sa/4.0/",
	"cc-by-nc-4.0":        "https://creativecommons.org/licenses/by-nc/4.0/",
	"cc0-1.0":             "https://creativecommons.org/publicdomain/zero/1.0/",
	"odc-by":              "https://opendatacommons.org/licenses/by/1-0/",
	"cdla-permissive-2.0": "https://cdla.dev/permissive-2-0/",
}

// licenseLink is the card's license_link: the one given, else the known
// text of license, else empty (the card then says what to fill in).
func licenseLink(license, given string) string {
	if given != "" {
		return given
	}
	return licenseTexts[strings.ToLower(license)]
}

// sizeCategory is the Hugging Face size_categories value for n rows.
func sizeCategory(n int) string {
	bounds := []struct {
		limit int
		name  string
	}{
		{1_000, "n<1K"}, {10_000, "1K<n<10K"}, {100_000, "10K<n<100K"},
		{1_000_000, "100K<n<1M"}, {10_000_000, "1M<n<10M"}, {100_000_000, "10M<n<100M"},
	}
	for _, b := range bounds {
		if n < b.limit {
			return b.name
		}
	}
	return "n>100M"
}

func render(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", strings.TrimSuffix(name, ".tmpl"), err)
	}
	return buf.Bytes(), nil
}

// writeCard writes README.md, the dataset card, into dir.
func writeCard(dir string, m *Manifest) error {
	data, err := render("README.md.tmpl", newCardData(m))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), data, 0o644); err != nil {
		return fmt.Errorf("write dataset card: %w", err)
	}
	return nil
}

// writeRecipes writes the training recipes into dir/recipe.
func writeRecipes(dir string, m *Manifest) error {
	rd := recipeData{
		MaxLength:     m.Options.MaxLength,
		Seed:          m.Options.Seed,
		HasValidation: m.Splits[SplitValidation].Rows > 0,
	}
	if err := os.MkdirAll(filepath.Join(dir, "recipe"), 0o755); err != nil {
		return fmt.Errorf("create recipe directory: %w", err)
	}
	for _, f := range []struct{ tmpl, name string }{
		{"train_lora.py.tmpl", "train_lora.py"},
		{"axolotl.yaml.tmpl", "axolotl.yaml"},
		{"openai.md.tmpl", "openai.md"},
	} {
		data, err := render(f.tmpl, rd)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "recipe", f.name), data, 0o644); err != nil {
			return fmt.Errorf("write recipe: %w", err)
		}
	}
	return nil
}
