// Package redact replaces secrets in text: API keys, tokens, passwords,
// private keys, credentials in URLs and, optionally, e-mail addresses. It is
// the one redaction of the project, used by the dataset export (distill),
// log imports (ingest), serve's session logs and the messages commands
// print.
package redact

import (
	"cmp"
	"slices"
	"strings"
)

// Redaction kinds, as counted in manifest.json and written into the text as
// [REDACTED:<kind>].
const (
	PrivateKey       = "private_key"
	ConnectionString = "connection_string"
	JWT              = "jwt"
	AnthropicKey     = "anthropic_key"
	OpenAIKey        = "openai_key"
	AWSAccessKeyID   = "aws_access_key_id"
	AWSSecretKey     = "aws_secret_key"
	GitHubToken      = "github_token"
	SlackToken       = "slack_token"
	GoogleAPIKey     = "google_api_key"
	BearerToken      = "bearer_token"
	Password         = "password"
	Email            = "email"
)

// Kinds lists every kind a Redactor may report, in the order of the rules.
// Where two rules find the same secret the earlier one names it, so a JWT
// sent as a bearer token is counted once, as a JWT, and the generic
// key=value rule never re-counts a value a specific rule found.
func Kinds() []string {
	kinds := make([]string, 0, len(secretRules)+1)
	for _, r := range secretRules {
		if len(kinds) == 0 || kinds[len(kinds)-1] != r.kind {
			kinds = append(kinds, r.kind)
		}
	}
	return append(kinds, Email)
}

// Redactor replaces secrets in text with [REDACTED:<kind>]. It is safe for
// concurrent use.
type Redactor struct {
	rules []rule
	// byFirst lists the hints by their first byte (both cases for the
	// hints of folding rules), so one pass over a text finds the rules
	// that may match it; pairs has a bit set for each pair of bytes a hint
	// starts with, which passes over most bytes of a text at once.
	byFirst [256][]hintRef
	pairs   [1 << 16 / 64]uint64
}

// allBytes are the second bytes a one-byte hint may be followed by.
var allBytes = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

type hintRef struct {
	hint string
	fold bool
	rule int
}

// New returns a Redactor for every secret kind, and for e-mail addresses
// when emails is set.
func New(emails bool) *Redactor {
	rules := secretRules
	if emails {
		rules = append(rules[:len(rules):len(rules)], emailRule)
	}
	r := &Redactor{rules: rules}
	for i, rule := range rules {
		for _, h := range rule.hints {
			r.index(hintRef{h, rule.fold, i})
		}
	}
	return r
}

// index files a hint under the bytes it may start with.
func (r *Redactor) index(ref hintRef) {
	h := ref.hint
	firsts, seconds := []byte{h[0]}, allBytes
	if len(h) > 1 {
		seconds = []byte{h[1]}
	}
	if ref.fold {
		firsts = append(firsts, upper(h[0]))
		if len(h) > 1 {
			seconds = append(seconds, upper(h[1]))
		}
	}
	for _, a := range slices.Compact(firsts) {
		r.byFirst[a] = append(r.byFirst[a], ref)
		for _, b := range seconds {
			p := uint16(a)<<8 | uint16(b)
			r.pairs[p/64] |= 1 << (p % 64)
		}
	}
}

// scrubber is the Redactor of Scrub: every kind, e-mail addresses too.
var scrubber = New(true)

// Scrub returns msg with every secret replaced. It is the one filter of the
// errors and log lines commands print, which quote flags, URLs (with their
// credentials), file contents and servers' replies.
func Scrub(msg string) string {
	out, _ := scrubber.Redact(msg)
	return out
}

// Redact returns s with every secret replaced, and how many it replaced per
// kind (nil when none). Redacting a redacted text changes nothing.
//
// Secrets are looked for in the text as it is and in decoded views of it:
// URL-decoded (a password percent-encoded in a URL's user-info or a query
// value), JSON-unescaped (up to three times, for JSON inside JSON inside a
// quoted error), with line breaks removed (a secret split across lines:
// every break, and every other one so a secret that was split ends at a
// break still), and in the base64 tokens of the text. A secret found in a view is replaced in the text where its
// encoded form stands; the parts of one secret found in several views
// (half a split key in the text, all of it in the joined view) are replaced
// as one. Joining cannot tell a key split across lines from a key that
// ends a line, so a secret at the end of a line takes the next line's first
// word (and the break) with it: more is replaced, never less.
func (r *Redactor) Redact(s string) (string, map[string]int) {
	var hits []hit
	var searched []string
	for _, chain := range viewChains {
		v := view{text: s}
		for _, d := range chain {
			v = v.decode(d)
		}
		if slices.Contains(searched, v.text) {
			continue
		}
		searched = append(searched, v.text)
		hits = r.search(s, chain, v.text, hits)
	}
	out, counts := r.replace(s, resolve(hits))
	out, c := r.redactBase64(out)
	for k, n := range c {
		if counts == nil {
			counts = map[string]int{}
		}
		counts[k] += n
	}
	return out, counts
}

// hit is a secret a rule found, as a span of the text.
type hit struct {
	from, to int
	rule     int
}

// search appends the secrets every rule finds in text, the view of s that
// chain decodes, as spans of s.
func (r *Redactor) search(s string, chain []decoder, text string, hits []hit) []hit {
	var v view // s with positions, decoded by chain when a hit needs them
	first := r.firstHints(text)
	for i := range r.rules {
		rule := &r.rules[i]
		rule.matches(text, first[i], func(from, to int) {
			if len(chain) > 0 {
				if v.pos == nil {
					v = tracked(s)
					for _, d := range chain {
						v = v.decode(d)
					}
				}
				from, to = v.pos[from], v.end[to-1]
			}
			hits = append(hits, hit{from, to, i})
		})
	}
	return hits
}

// matches calls f with the span of each secret the rule finds in text,
// where its first hint stands at at (-1 for nowhere). The regexp runs only
// on the parts of the text that hold the matches, which gives the same
// matches as the whole text: a word is bounded by white space, which \b
// sees as it sees the text's ends; an anchored match at a hint is what an
// unanchored search finds there.
func (rule *rule) matches(text string, at int, f func(from, to int)) {
	switch {
	case rule.windows != nil:
		for _, w := range rule.windows(text) {
			rule.matchIn(text, w[0], w[1], f)
		}
	case at < 0:
	case rule.token:
		for at >= 0 {
			from, to := wordAround(text, at)
			rule.matchIn(text, from, to, f)
			at = rule.nextHint(text, to)
		}
	case rule.fold && hasFoldedRunes(text):
		// A folded hint is not where nextHint looks: search it all.
		rule.matchIn(text, 0, len(text), f)
	default:
		for at >= 0 {
			next := at + 1
			if !rule.boundary || at == 0 || !isWordByte(text[at-1]) {
				if loc := rule.anchored.FindStringSubmatchIndex(text[at:]); loc != nil {
					if a, b, ok := rule.secret(text[at:], loc); ok {
						f(at+a, at+b)
					}
					next = max(next, at+loc[1])
				}
			}
			at = rule.nextHint(text, next)
		}
	}
}

// nextHint returns where the first of the rule's hints stands in text at
// or after pos, or -1.
func (rule *rule) nextHint(text string, pos int) int {
	if !rule.fold {
		next := -1
		for _, h := range rule.hints {
			if i := strings.Index(text[pos:], h); i >= 0 && (next < 0 || pos+i < next) {
				next = pos + i
			}
		}
		return next
	}
	for i := pos; i < len(text); i++ {
		for _, h := range rule.hints {
			if hasPrefix(text[i:], h, true) {
				return i
			}
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

func (rule *rule) matchIn(text string, from, to int, f func(from, to int)) {
	part := text[from:to]
	for _, loc := range rule.re.FindAllStringSubmatchIndex(part, -1) {
		if a, b, ok := rule.secret(part, loc); ok {
			f(from+a, from+b)
		}
	}
}

// wordAround returns the run of text around at that holds no white space
// (as \s means it).
func wordAround(text string, at int) (from, to int) {
	from = strings.LastIndexAny(text[:at], whiteSpace) + 1
	to = strings.IndexAny(text[at:], whiteSpace)
	if to < 0 {
		return from, len(text)
	}
	return from, at + to
}

// whiteSpace is what \s matches.
const whiteSpace = "\t\n\f\r "

// firstHints returns, for each rule, where the first of its hints stands in
// text (-1 for nowhere), found in one pass.
func (r *Redactor) firstHints(text string) []int {
	first := make([]int, len(r.rules))
	for i := range first {
		first[i] = -1
	}
	for i := 0; i < len(text); i++ {
		p := uint16(text[i]) << 8
		if i+1 < len(text) {
			p |= uint16(text[i+1])
		}
		if r.pairs[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		for _, h := range r.byFirst[text[i]] {
			if first[h.rule] < 0 && hasPrefix(text[i:], h.hint, h.fold) {
				first[h.rule] = i
			}
		}
	}
	if hasFoldedRunes(text) {
		// (?i) also folds k to the Kelvin sign and s to the long s.
		for i, rule := range r.rules {
			if rule.fold {
				first[i] = 0
			}
		}
	}
	return first
}

// hasPrefix reports whether s starts with the hint, ignoring ASCII case
// when fold is set (the hints of folding rules are lower-case).
func hasPrefix(s, hint string, fold bool) bool {
	if len(s) < len(hint) {
		return false
	}
	if !fold {
		return s[:len(hint)] == hint
	}
	for i := range len(hint) {
		if c := s[i]; c != hint[i] && c != upper(hint[i]) {
			return false
		}
	}
	return true
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// secret returns the span of the secret in a match (without the quotes
// around a quoted value, so JSON in the text stays JSON), or false when the
// rule leaves it alone.
func (rule *rule) secret(text string, loc []int) (from, to int, ok bool) {
	from, to = loc[0], loc[1]
	if rule.group > 0 {
		from, to = loc[2*rule.group], loc[2*rule.group+1]
		if from < 0 {
			return 0, 0, false
		}
	}
	v := text[from:to]
	if rule.keep != nil && rule.keep(v) {
		return 0, 0, false
	}
	for _, q := range []string{`\"`, `"`, `'`} {
		if len(v) >= 2*len(q) && strings.HasPrefix(v, q) && strings.HasSuffix(v, q) {
			return from + len(q), to - len(q), true
		}
	}
	return from, to, to > from
}

// resolve orders the hits and settles overlaps: the hits of one rule that
// overlap are one secret (a split key found whole in the joined view and in
// part in the text); a hit that holds secrets earlier rules found is one
// secret with them, named by the earliest rule (a JWT sent as a bearer
// token is a JWT, a key in a URL's password takes the password along); and
// a hit that overlaps an earlier rule's secret only in part is dropped, as
// if that rule had replaced its secret first. The result is sorted by
// position, without overlaps.
func resolve(hits []hit) []hit {
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Or(a.rule-b.rule, a.from-b.from) })
	var kept []hit
	for i := 0; i < len(hits); {
		// Merge a run of one rule's overlapping hits.
		h := hits[i]
		for i++; i < len(hits) && hits[i].rule == h.rule && hits[i].from < h.to; i++ {
			h.to = max(h.to, hits[i].to)
		}
		inside := func(k hit) bool { return h.from <= k.from && k.to <= h.to }
		partial := false
		for _, k := range kept {
			switch {
			case k.to <= h.from || h.to <= k.from:
			case inside(k):
				h.rule = min(h.rule, k.rule)
			default:
				partial = true
			}
		}
		if !partial {
			kept = append(slices.DeleteFunc(kept, inside), h)
		}
	}
	slices.SortFunc(kept, func(a, b hit) int { return a.from - b.from })
	return kept
}

// replace writes s with each span replaced by its marker.
func (r *Redactor) replace(s string, spans []hit) (string, map[string]int) {
	if len(spans) == 0 {
		return s, nil
	}
	counts := map[string]int{}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, h := range spans {
		kind := r.rules[h.rule].kind
		b.WriteString(s[last:h.from])
		b.WriteString("[REDACTED:" + kind + "]")
		last = h.to
		counts[kind]++
	}
	b.WriteString(s[last:])
	return b.String(), counts
}
