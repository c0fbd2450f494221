package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// proseRun is the number of consecutive words of a template that, found in
// a string literal of the model's code, make it a restated sentence.
const proseRun = 6

// TestNoPromptProse checks that the model finds the parts of a prompt by
// the markers templates exports, never by restating the prompts' sentences:
// no string literal of its code (tests excluded) holds proseRun words in a
// row of any template, so rewording a prompt cannot silently change what
// the model does.
func TestNoPromptProse(t *testing.T) {
	runs := templateRuns(t)
	for _, lit := range stringLiterals(t) {
		words := proseWords(lit.text)
		for i := 0; i+proseRun <= len(words); i++ {
			run := strings.Join(words[i:i+proseRun], " ")
			if tmpl, ok := runs[run]; ok {
				t.Errorf("%s: %q restates %s (%q); name the prompt part by a marker of package templates instead", lit.pos, lit.text, tmpl, run)
				break
			}
		}
	}
}

// templateRuns maps every run of proseRun words of the templates to the
// template it is from.
func templateRuns(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "templates")
	names, err := fs.Glob(os.DirFS(dir), "*.tmpl")
	if err != nil || len(names) == 0 {
		t.Fatalf("templates in %s: %v (found %d)", dir, err, len(names))
	}
	runs := map[string]string{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// A run does not cross template code: it is not prompt text.
		for _, part := range templateCode.Split(string(b), -1) {
			words := proseWords(part)
			for i := 0; i+proseRun <= len(words); i++ {
				runs[strings.Join(words[i:i+proseRun], " ")] = name
			}
		}
	}
	return runs
}

var templateCode = regexp.MustCompile(`{[{%#].*?[}%#]}`)

// proseWords are the lower-case words of s: runs of letters, digits and
// apostrophes.
func proseWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

type literal struct {
	pos  token.Position
	text string
}

// stringLiterals returns the string literals of the package's non-test
// files.
func stringLiterals(t *testing.T) []literal {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []literal
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				s, err := strconv.Unquote(bl.Value)
				if err != nil {
					t.Fatalf("%s: %v", fset.Position(bl.Pos()), err)
				}
				out = append(out, literal{fset.Position(bl.Pos()), s})
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatal("no string literal found: the check reads nothing")
	}
	return out
}
