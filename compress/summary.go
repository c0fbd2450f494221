package compress

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ctxopt/ctxopt/llm"
)

// SummaryContract is what a history guideline asks of the summaries written
// with it, as the guideline package's validation reads it from the
// guideline (a Template that has one implements Contracted).
type SummaryContract struct {
	// Sections are the headings the guideline names for its output
	// ("REASONING", "FACT CACHE"); a summary in the guideline's format
	// writes at least one of them. Empty: the guideline names none.
	Sections []string
}

// Contracted is implemented by guideline templates that state a contract.
type Contracted interface {
	SummaryContract() SummaryContract
}

// ContractOf is p's contract, empty when its template states none.
func ContractOf(p *Prompt) SummaryContract {
	if c, ok := p.Template.(Contracted); ok {
		return c.SummaryContract()
	}
	return SummaryContract{}
}

// ErrInvalidSummary marks a summary CheckSummary rejects.
var ErrInvalidSummary = errors.New("invalid summary")

// The rules of CheckSummary and CheckRefined, as a rejection names them:
// a small fixed set, so a metric may carry them as a label.
const (
	RuleEmpty      = "empty"
	RuleCoverage   = "coverage"
	RuleNotShorter = "not_shorter"
	RuleNoSection  = "no_section"
)

// SummaryError is a rejection by CheckSummary or CheckRefined: the rule
// broken and how. It is ErrInvalidSummary to errors.Is.
type SummaryError struct {
	Rule   string
	Detail string
}

func (e *SummaryError) Error() string { return ErrInvalidSummary.Error() + ": " + e.Detail }

// Is makes a SummaryError match ErrInvalidSummary.
func (e *SummaryError) Is(target error) bool { return target == ErrInvalidSummary }

// RuleOf is the rule err broke, "" when err is no SummaryError.
func RuleOf(err error) string {
	var se *SummaryError
	if errors.As(err, &se) {
		return se.Rule
	}
	return ""
}

func reject(rule, format string, args ...any) error {
	return &SummaryError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// CheckSummary is what a valid history summary is, for rollouts, eval and
// serve alike: out folds in turns past what in covered, its summary is not
// empty, is shorter (in tokens) than the previous summary and the turns it
// replaces, and writes at least one of the contract's sections (in any
// case) when it names any. The error, a *SummaryError, says which rule
// failed.
func CheckSummary(tok *llm.Tokenizer, in Input, out Output, c SummaryContract) error {
	s := strings.TrimSpace(out.Summary)
	if s == "" {
		return reject(RuleEmpty, "empty")
	}
	if out.Covered <= in.Covered || out.Covered > len(in.History) {
		return reject(RuleCoverage, "covers messages up to %d, not past %d", out.Covered, in.Covered)
	}
	n := tok.Count(s)
	orig := tok.Count(in.Summary) + tok.CountMessages(in.History[in.Covered:out.Covered])
	if n >= orig {
		return reject(RuleNotShorter, "%d tokens, not shorter than the %d it replaces", n, orig)
	}
	if len(c.Sections) == 0 {
		return nil
	}
	upper := strings.ToUpper(s)
	for _, h := range c.Sections {
		if strings.Contains(upper, strings.ToUpper(h)) {
			return nil
		}
	}
	return reject(RuleNoSection, "none of the guideline's sections (%s)", strings.Join(c.Sections, ", "))
}

// CheckRefined is what a valid refined observation is: not empty, and
// shorter (in tokens) than the observation it replaces.
func CheckRefined(tok *llm.Tokenizer, observation, refined string) error {
	t := strings.TrimSpace(refined)
	if t == "" {
		return reject(RuleEmpty, "empty")
	}
	if n, orig := tok.Count(t), tok.Count(observation); n >= orig {
		return reject(RuleNotShorter, "%d tokens, not shorter than the %d of the observation", n, orig)
	}
	return nil
}
