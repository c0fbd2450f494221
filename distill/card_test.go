package distill

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// 🤗 datasets reads every configuration of a directory with one builder,
// chosen from the data files' format: a card whose configurations mix
// Parquet and JSON lines fails to load one of them ("Parquet magic bytes
// not found" on a .jsonl file, datasets 5.2). Every configuration must name
// files of one format, and each file must exist.
func TestCardConfigsShareOneFormat(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dataset")
	if _, err := Build(t.Context(), "testdata/run", out, Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "---\n", 3)
	if len(parts) != 3 || parts[0] != "" {
		t.Fatalf("README.md has no front matter")
	}
	var front struct {
		Configs []struct {
			Name  string `yaml:"config_name"`
			Files []struct {
				Split string `yaml:"split"`
				Path  string `yaml:"path"`
			} `yaml:"data_files"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal([]byte(parts[1]), &front); err != nil {
		t.Fatal(err)
	}
	if len(front.Configs) < 2 {
		t.Fatalf("want the default and messages configurations, got %+v", front.Configs)
	}
	formats := map[string][]string{}
	for _, c := range front.Configs {
		for _, f := range c.Files {
			formats[filepath.Ext(f.Path)] = append(formats[filepath.Ext(f.Path)], c.Name+":"+f.Path)
			if _, err := os.Stat(filepath.Join(out, f.Path)); err != nil {
				t.Errorf("config %s split %s: %v", c.Name, f.Split, err)
			}
		}
	}
	if len(formats) != 1 {
		t.Errorf("the configurations mix formats: %v", formats)
	}
}

// A split without rows makes 🤗 datasets fail ("Instruction "validation"
// corresponds to no data", datasets 5.2): the card's snippet names only
// the splits with rows and says why, and the recipe leaves an empty split
// out before load_dataset and evaluates only when validation is loaded.
func TestCardRecipeEmptyValidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fraction float64
		snippet  string
		note     bool
	}{
		{"empty", 0, `data_files={"train": "data/train.parquet"})`, true},
		{"both", 0.5, `data_files={"train": "data/train.parquet", "validation": "data/validation.parquet"})`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dataset")
			m, err := Build(t.Context(), "testdata/run", out, Options{ValidationFraction: &tc.fraction})
			if err != nil {
				t.Fatal(err)
			}
			if empty := m.Splits[SplitValidation].Rows == 0; empty != tc.note {
				t.Fatalf("validation rows %d: the test data no longer give the case", m.Splits[SplitValidation].Rows)
			}
			card := readFile(t, filepath.Join(out, "README.md"))
			if !strings.Contains(card, `ds = load_dataset("parquet", `+tc.snippet) {
				t.Errorf("card's snippet is not %s:\n%s", tc.snippet, card)
			}
			if got := strings.Contains(card, "leaves out the empty split(s) (validation)"); got != tc.note {
				t.Errorf("card explains the left-out split: %v, want %v", got, tc.note)
			}
		})
	}
	recipe := readFile(t, filepath.Join("testdata", "golden", "recipe", "train_lora.py"))
	filter := regexp.MustCompile(`files = \{[^\n]*if pq\.ParquetFile\(p\)\.metadata\.num_rows > 0\}`)
	loc := filter.FindStringIndex(recipe)
	load := strings.Index(recipe, `load_dataset("parquet", data_files=files)`)
	if loc == nil || load < loc[1] {
		t.Error("the recipe does not leave out empty split files before load_dataset")
	}
	if !strings.Contains(recipe, `eval_data = data["validation"] if "validation" in data`) {
		t.Error("the recipe does not evaluate only when a validation split was loaded")
	}
}

func TestLicenseLink(t *testing.T) {
	for _, tc := range []struct{ license, given, want string }{
		{"apache-2.0", "", "https://www.apache.org/licenses/LICENSE-2.0"},
		{"Apache-2.0", "", "https://www.apache.org/licenses/LICENSE-2.0"},
		{"apache-2.0", "LICENSE.md", "LICENSE.md"},
		{"other", "", ""},
		{"", "", ""},
		{"other", "https://example.com/terms", "https://example.com/terms"},
	} {
		if got := licenseLink(tc.license, tc.given); got != tc.want {
			t.Errorf("licenseLink(%q, %q) = %q, want %q", tc.license, tc.given, got, tc.want)
		}
	}
}

// The card writes license_link when it is known (given, or a well-known
// license's text) and otherwise says where to fill it in.
func TestCardLicenseLinkFill(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		front, not string
	}{
		{"known license", Options{License: "apache-2.0"},
			"license_link: \"https://www.apache.org/licenses/LICENSE-2.0\"\n", "No license text is linked"},
		{"unknown", Options{},
			"# license_link: fill in the URL or path of the license text (optimize distill --license-link)\n", "License text: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dataset")
			if _, err := Build(t.Context(), "testdata/run", out, tc.opts); err != nil {
				t.Fatal(err)
			}
			card := readFile(t, filepath.Join(out, "README.md"))
			front := strings.SplitN(card, "---\n", 3)[1]
			if !strings.Contains(front, tc.front) {
				t.Errorf("front matter lacks %q:\n%s", tc.front, front)
			}
			if strings.Contains(card, tc.not) {
				t.Errorf("card says %q", tc.not)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
