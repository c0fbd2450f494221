package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is a test named in parentheses: a bare name is a test of this
// package, a qualified one (templates.TestMarkers, cmd/optimize.TestX) a
// test of the package at that path from the module's root.
var citation = regexp.MustCompile(`\b((?:[a-z]+/)*[a-z]+\.)?((?:Test|Benchmark)[A-Za-z0-9_]+)\b`)

// TestDocumentedClaims keeps docs/embedded-model.md true to the tests: every
// test it cites exists, and every paragraph, list item and table row of
// prose cites at least one (headings, the quoted reply and code are not
// claims).
func TestDocumentedClaims(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "embedded-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{} // package dir -> its tests' source
	testsOf := func(dir string) string {
		if src, ok := sources[dir]; ok {
			return src
		}
		files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
		var b strings.Builder
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		sources[dir] = b.String()
		return sources[dir]
	}
	cited := 0
	for _, block := range claimBlocks(string(doc)) {
		ms := citation.FindAllStringSubmatch(block, -1)
		if len(ms) == 0 {
			t.Errorf("docs/embedded-model.md: a claim cites no test:\n%s", block)
		}
		for _, m := range ms {
			dir := filepath.Join("llm", "sim")
			if m[1] != "" {
				dir = filepath.FromSlash(strings.TrimSuffix(m[1], "."))
			}
			if !strings.Contains(testsOf(dir), "func "+m[2]+"(") {
				t.Errorf("docs/embedded-model.md cites %s%s, which %s has no test of that name", m[1], m[2], dir)
			}
			cited++
		}
	}
	if cited < 40 {
		t.Errorf("only %d citations found; the page or this reader changed", cited)
	}
}

// claimBlocks returns the paragraphs, list items and table rows of a
// Markdown page, leaving out headings, quotes, code and table rules.
func claimBlocks(doc string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```"):
			fence = !fence
			flush()
		case fence || strings.HasPrefix(line, "    ") && len(cur) == 0:
		case t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, ">"):
			flush()
		case strings.HasPrefix(t, "|"):
			flush()
			if !strings.HasPrefix(t, "| ---") && !strings.HasPrefix(t, "| flag") && !strings.HasPrefix(t, "| directive") {
				out = append(out, t)
			}
		case strings.HasPrefix(t, "- "):
			flush()
			cur = append(cur, t)
		default:
			cur = append(cur, t)
		}
	}
	flush()
	return out
}
