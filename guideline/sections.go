package guideline

import (
	"regexp"
	"slices"
)

// sectionRE finds the headings a guideline names for its output: phrases
// in capitals, such as "REASONING" opening a line ("REASONING: describe
// ...") or "FACT CACHE" named by a rule ("copy ... into a FACT CACHE").
var sectionRE = regexp.MustCompile(`\b[A-Z]{2,}(?: [A-Z]{2,})*\b`)

// minSection is the shortest heading: shorter capitals are abbreviations
// ("ID", "URL"), not sections.
const minSection = 4

// sections are the headings a history guideline names in its text
// (template code aside), in order of appearance, each once. A guideline
// that asks for sections gets a summary in at least one of them: its rules
// may move facts from one section to another (COMPLETED to a FACT CACHE),
// so requiring them all would reject summaries the guideline asked for.
func sections(segs []segment) []string {
	var out []string
	for _, s := range segs {
		if s.kind != segText || s.skip {
			continue
		}
		for _, h := range sectionRE.FindAllString(s.inner, -1) {
			if len(h) >= minSection && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}
