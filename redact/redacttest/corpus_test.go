package redacttest

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// base64Tokens finds what the regular expression it replaces finds, on
// every shape of the corpus and on the edges of its rule.
func TestBase64TokensMatchRegexp(t *testing.T) {
	re := regexp.MustCompile(`[A-Za-z0-9+/_\-]{16,}={0,2}`)
	texts := []string{"", "abc", strings.Repeat("a", 15), strings.Repeat("a", 16), strings.Repeat("a", 16) + "===x",
		"x " + strings.Repeat("b", 15) + " " + strings.Repeat("c", 17) + "=", "é" + strings.Repeat("Zz09", 5) + "\xff=" + strings.Repeat("-_+/", 4) + "=="}
	for _, s := range Samples() {
		for _, sh := range Shapes(s) {
			texts = append(texts, sh.Text)
		}
	}
	for _, text := range texts {
		if got, want := base64Tokens(text), re.FindAllString(text, -1); !slices.Equal(got, want) {
			t.Errorf("base64Tokens(%q) = %q, want %q", text, got, want)
		}
	}
}

// Recovered answers from the fragments found in one pass what looking for
// the secret and each of its pieces in every view answers, on every shape
// of every sample, each pair of samples, and texts around them.
func TestRecoveredMatchesScan(t *testing.T) {
	var texts []string
	for _, s := range Samples() {
		for _, sh := range Shapes(s) {
			texts = append(texts, sh.Text, "x"+sh.Text[1:], sh.Text[:len(sh.Text)/2])
		}
	}
	other := Sample{Kind: "other", Leak: "not-of-the-corpus-9q"}
	texts = append(texts, "", "see not-of-the-corpus-9q here", strings.Join(texts, "\n"))
	for _, text := range texts {
		d := Decode(text)
		for _, s := range append(Samples(), other) {
			if got, want := d.Recovered(s), scan(d.views, s.Leak); got != want {
				t.Errorf("Recovered(%q, %s) = %q, scanning finds %q", text, s.Kind, got, want)
			}
		}
	}
}
