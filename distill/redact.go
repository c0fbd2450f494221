package distill

import (
	"regexp"
	"strings"
)

// Redaction kinds, as counted in manifest.json and written into the text as
// [REDACTED:<kind>].
const (
	RedactPrivateKey       = "private_key"
	RedactConnectionString = "connection_string"
	RedactJWT              = "jwt"
	RedactAnthropicKey     = "anthropic_key"
	RedactOpenAIKey        = "openai_key"
	RedactAWSAccessKeyID   = "aws_access_key_id"
	RedactAWSSecretKey     = "aws_secret_key"
	RedactGitHubToken      = "github_token"
	RedactSlackToken       = "slack_token"
	RedactGoogleAPIKey     = "google_api_key"
	RedactBearerToken      = "bearer_token"
	RedactPassword         = "password"
	RedactEmail            = "email"
)

// RedactionKinds lists every kind a Redactor may report, in the order the
// patterns run. Specific patterns come first, so a JWT sent as a bearer token
// is counted once, as a JWT, and the generic key=value rule never re-redacts a
// value an earlier rule replaced.
func RedactionKinds() []string {
	kinds := make([]string, 0, len(secretRules)+1)
	for _, r := range secretRules {
		if len(kinds) == 0 || kinds[len(kinds)-1] != r.kind {
			kinds = append(kinds, r.kind)
		}
	}
	return append(kinds, RedactEmail)
}

type redactRule struct {
	kind string
	re   *regexp.Regexp
	// hints are substrings one of which every match contains; a text with
	// none of them skips the regexp, which keeps redaction cheap on the
	// common, secret-free text. Compared against the lower-cased text when
	// fold is set.
	hints []string
	fold  bool
	// group, when > 0, is the submatch that holds the secret; the rest of
	// the match (a key name, a scheme) is kept so the text stays readable.
	group int
	// keep reports whether a matched secret should be left alone (a value
	// some earlier rule already replaced, an empty placeholder).
	keep func(secret string) bool
}

// The JSON-string alternatives in the key=value rules also accept the escaped
// form (\"...\") that appears when a tool output embeds JSON inside a string.
const quotedValue = `\\"(?:[^"\\\n]|\\[^"\n])*\\"|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'`

var secretRules = []redactRule{
	{
		// A whole PEM block; a block cut off before its END line still loses
		// its base64 body.
		kind:  RedactPrivateKey,
		re:    regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:(?:\\[nr]|\s)+[A-Za-z0-9+/=]{16,})*)`),
		hints: []string{"PRIVATE KEY"},
	},
	{
		// scheme://user:password@host: the whole user-info goes.
		kind:  RedactConnectionString,
		re:    regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.\-]*://([^\s:/?#@"'<>\[\]]+:[^\s@/"'<>]+)@`),
		hints: []string{"://"},
		group: 1,
	},
	{
		kind:  RedactJWT,
		re:    regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}`),
		hints: []string{"eyJ"},
	},
	{
		kind:  RedactAnthropicKey,
		re:    regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{20,}`),
		hints: []string{"sk-ant-"},
	},
	{
		kind:  RedactOpenAIKey,
		re:    regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`),
		hints: []string{"sk-"},
	},
	{
		kind:  RedactAWSAccessKeyID,
		re:    regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b`),
		hints: []string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA"},
	},
	{
		kind:  RedactAWSSecretKey,
		re:    regexp.MustCompile(`(?i)aws_?secret_?(?:access_?)?key(?:_id)?\\?["']?\s*[:=]\s*\\?["']?([A-Za-z0-9/+=]{40})`),
		hints: []string{"aws"},
		fold:  true,
		group: 1,
	},
	{
		kind:  RedactGitHubToken,
		re:    regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})`),
		hints: []string{"gh", "github_pat_"},
	},
	{
		kind:  RedactSlackToken,
		re:    regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`),
		hints: []string{"xox", "hooks.slack.com"},
	},
	{
		kind:  RedactGoogleAPIKey,
		re:    regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`),
		hints: []string{"AIza"},
	},
	{
		kind:  RedactBearerToken,
		re:    regexp.MustCompile(`(?i)(?:\bbearer|authorization\\?["']?\s*[:=]\s*\\?["']?(?:basic|token))\s+([A-Za-z0-9\-._~+/]{16,}=*)`),
		hints: []string{"bearer", "authorization"},
		fold:  true,
		group: 1,
	},
	{
		// key=value and "key": "value" pairs whose key names a credential.
		kind: RedactPassword,
		re: regexp.MustCompile(`(?i)\b[a-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|secret[_\-]?(?:access[_\-]?)?key|private[_\-]?key|api[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token)\\?["']?\s*[:=]\s*(` +
			quotedValue + `|[^\s,;&"'<>{}()\[\]\\]+)`),
		hints: []string{"pass", "pwd", "secret", "key", "token"},
		fold:  true,
		group: 1,
		keep: func(v string) bool {
			v = strings.Trim(v, `\"'`)
			return v == "" || v == "null" || strings.HasPrefix(v, "[REDACTED:")
		},
	},
}

var emailRule = redactRule{
	kind:  RedactEmail,
	re:    regexp.MustCompile(`\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b`),
	hints: []string{"@"},
}

// Redactor replaces secrets in text with [REDACTED:<kind>]. It is safe for
// concurrent use.
type Redactor struct {
	rules []redactRule
}

// NewRedactor returns a Redactor for every secret kind, and for e-mail
// addresses when emails is set.
func NewRedactor(emails bool) *Redactor {
	rules := secretRules
	if emails {
		rules = append(rules[:len(rules):len(rules)], emailRule)
	}
	return &Redactor{rules: rules}
}

// Redact returns s with every secret replaced, and how many it replaced per
// kind (nil when none). Redacting a redacted text changes nothing.
func (r *Redactor) Redact(s string) (string, map[string]int) {
	var counts map[string]int
	var lower string
	for i := range r.rules {
		rule := &r.rules[i]
		hay := s
		if rule.fold {
			if lower == "" {
				lower = strings.ToLower(s)
			}
			hay = lower
		}
		if !containsAny(hay, rule.hints) {
			continue
		}
		out, n := rule.apply(s)
		if n == 0 {
			continue
		}
		if counts == nil {
			counts = map[string]int{}
		}
		counts[rule.kind] += n
		s, lower = out, ""
	}
	return s, counts
}

func (rule *redactRule) apply(s string) (string, int) {
	locs := rule.re.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s, 0
	}
	var b strings.Builder
	last, n := 0, 0
	for _, loc := range locs {
		start, end := loc[0], loc[1]
		if rule.group > 0 {
			start, end = loc[2*rule.group], loc[2*rule.group+1]
			if start < 0 {
				continue
			}
		}
		secret := s[start:end]
		if rule.keep != nil && rule.keep(secret) {
			continue
		}
		// Keep the quotes around a quoted value so JSON in the text stays
		// JSON.
		open, close := quotesOf(secret)
		b.WriteString(s[last:start])
		b.WriteString(open)
		b.WriteString("[REDACTED:")
		b.WriteString(rule.kind)
		b.WriteString("]")
		b.WriteString(close)
		last = end
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

func quotesOf(v string) (string, string) {
	for _, q := range []string{`\"`, `"`, `'`} {
		if len(v) >= 2*len(q) && strings.HasPrefix(v, q) && strings.HasSuffix(v, q) {
			return q, q
		}
	}
	return "", ""
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
