package redact

import (
	"regexp"
	"slices"
	"strings"
)

type rule struct {
	kind string
	re   *regexp.Regexp
	// hints are substrings one of which every match contains; a text with
	// none of them skips the regexp, which keeps redaction cheap on the
	// common, secret-free text (Go's regexp scans it at a few MB/s). They
	// are lower-case and compared ignoring case when fold is set.
	hints []string
	fold  bool
	// token is set when a match holds no white space (\s) and contains a
	// hint: the regexp runs only on the words that hold one. Otherwise a
	// match starts with a hint (after a word boundary when boundary is
	// set), and anchored, the regexp runs at each.
	token    bool
	boundary bool
	anchored *regexp.Regexp
	// windows, when set instead of hints, returns the parts of a text that
	// hold every match.
	windows func(s string) [][2]int
	// group, when > 0, is the submatch that holds the secret; the rest of
	// the match (a key name, a scheme) is kept so the text stays readable.
	group int
	// keep reports whether a matched secret should be left alone (a value
	// already replaced, an empty placeholder).
	keep func(secret string) bool
}

// credentialKeys end the key names whose values the password rule
// replaces.
const credentialKeys = `password|passwd|passphrase|pwd|secret|secret[_\-]?(?:access[_\-]?)?key|private[_\-]?key|api[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token`

// bearerValue is the token after Bearer, Basic or Token.
const bearerValue = `[A-Za-z0-9\-._~+/]{16,}=*`

// The JSON-string alternatives in the key=value rules also accept the escaped
// form (\"...\") that appears when a tool output embeds JSON inside a string.
const quotedValue = `\\"(?:[^"\\\n]|\\[^"\n])*\\"|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'`

// awsKeyPrefixes start AWS access key ids (and the other unique ids IAM
// gives out with the same shape).
var awsKeyPrefixes = []string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA"}

var secretRules = anchor([]rule{
	{
		// A whole PEM block; a block cut off before its END line still loses
		// its base64 body.
		kind:  PrivateKey,
		re:    regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:(?:\\[nr]|\s)+[A-Za-z0-9+/=]{16,})*)`),
		hints: []string{"-----BEGIN"},
	},
	{
		// scheme://user:password@host: the whole user-info goes, up to the
		// last @ of the authority (a password may hold a decoded %40).
		kind:  ConnectionString,
		re:    regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.\-]*://([^\s:/?#@"'<>\[\]]+:[^\s/"'<>]+)@`),
		hints: []string{"://"},
		token: true,
		group: 1,
	},
	{
		// scheme://token@host: a bare token as the user-info (git over
		// HTTPS with a personal token), percent-encoded or not. Short user
		// names (git@) stay.
		kind:  ConnectionString,
		re:    regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.\-]*://([A-Za-z0-9_\-.~+/=%]{16,})@`),
		hints: []string{"://"},
		token: true,
		group: 1,
	},
	{
		kind: JWT,
		// The header is JSON ("eyJ" in base64url); the payload may be
		// anything (an encrypted or non-JSON payload does not start eyJ).
		re:    regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}`),
		hints: []string{"eyJ"},
		token: true,
	},
	{
		kind:  AnthropicKey,
		re:    regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{20,}`),
		hints: []string{"sk-ant-"},
		token: true,
	},
	{
		kind:  OpenAIKey,
		re:    regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`),
		hints: []string{"sk-"},
		token: true,
	},
	{
		kind:  AWSAccessKeyID,
		re:    regexp.MustCompile(`\b(?:` + strings.Join(awsKeyPrefixes, "|") + `)[A-Z0-9]{16}\b`),
		hints: awsKeyPrefixes,
		token: true,
	},
	{
		kind:  AWSSecretKey,
		re:    regexp.MustCompile(`(?i)aws_?secret_?(?:access_?)?key(?:_id)?\\?["']?\s*[:=]\s*\\?["']?([A-Za-z0-9/+=]{40})`),
		hints: []string{"aws"},
		fold:  true,
		group: 1,
	},
	{
		kind:  GitHubToken,
		re:    regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})`),
		hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		token: true,
	},
	{
		kind:  SlackToken,
		re:    regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`),
		hints: []string{"xox", "hooks.slack.com"},
		token: true,
	},
	{
		kind:  GoogleAPIKey,
		re:    regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`),
		hints: []string{"AIza"},
		token: true,
	},
	{
		kind:     BearerToken,
		re:       regexp.MustCompile(`(?i)\bbearer\s+(` + bearerValue + `)`),
		hints:    []string{"bearer"},
		fold:     true,
		boundary: true,
		group:    1,
	},
	{
		kind:  BearerToken,
		re:    regexp.MustCompile(`(?i)authorization\\?["']?\s*[:=]\s*\\?["']?(?:basic|token)\s+(` + bearerValue + `)`),
		hints: []string{"authorization"},
		fold:  true,
		group: 1,
	},
	{
		// key=value and "key": "value" pairs whose key names a credential.
		kind: Password,
		re: regexp.MustCompile(`(?i)\b[a-z0-9_.\-]*(?:` + credentialKeys + `)\\?["']?\s*[:=]\s*(` +
			quotedValue + `|[^\s,;&"'<>{}()\[\]\\]+)`),
		windows: credentialWindows,
		group:   1,
		keep: func(v string) bool {
			v = strings.Trim(v, `\"'`)
			return v == "" || v == "null" || strings.HasPrefix(v, "[REDACTED:")
		},
	},
})

// anchor compiles, for each rule whose matches start at a hint, its regexp
// anchored at the start of the text.
func anchor(rules []rule) []rule {
	for i := range rules {
		if r := &rules[i]; !r.token && r.windows == nil {
			r.anchored = regexp.MustCompile(`^(?:` + r.re.String() + `)`)
		}
	}
	return rules
}

var emailRule = rule{
	kind:  Email,
	re:    regexp.MustCompile(`\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b`),
	hints: []string{"@"},
	token: true,
}

// credentialKeyEnd matches the end of a key name the password rule takes.
var credentialKeyEnd = regexp.MustCompile(`(?i)(?:` + credentialKeys + `)$`)

// credentialWindows returns the parts of s that hold the password rule's
// matches: from the word whose key name, a credential's, ends before a : or
// = (past the spaces, quote and backslash the rule allows between them) to
// the end of the line the value starts on. A value never spans lines.
func credentialWindows(s string) [][2]int {
	folded := hasFoldedRunes(s)
	var windows [][2]int
	for i := strings.IndexAny(s, ":="); i >= 0; {
		if j := credentialKeyBefore(s[:i], folded); j >= 0 {
			from := strings.LastIndexAny(s[:j], whiteSpace) + 1
			k := i + 1
			for k < len(s) && strings.IndexByte(whiteSpace, s[k]) >= 0 {
				k++
			}
			to := len(s)
			if n := strings.IndexByte(s[k:], '\n'); n >= 0 {
				to = k + n
			}
			if last := len(windows) - 1; last >= 0 && from <= windows[last][1] {
				windows[last][1] = max(windows[last][1], to)
			} else {
				windows = append(windows, [2]int{from, to})
			}
		}
		next := strings.IndexAny(s[i+1:], ":=")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return windows
}

// hasFoldedRunes reports whether s holds a rune (?i) folds to an ASCII
// letter that ASCII case folding does not: the Kelvin sign, the long s.
func hasFoldedRunes(s string) bool {
	return strings.Contains(s, "\u212a") || strings.Contains(s, "\u017f")
}

// credentialKeyBefore returns where the key name ends that s (the text
// before a : or =) ends with, when it is a credential's, or -1.
func credentialKeyBefore(s string, folded bool) int {
	j := len(s)
	for j > 0 && strings.IndexByte(whiteSpace, s[j-1]) >= 0 {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
	}
	if j > 0 && s[j-1] == '\\' {
		j--
	}
	if !folded && !slices.ContainsFunc(credentialKeyLastWords, func(w string) bool {
		return j >= len(w) && strings.EqualFold(s[j-len(w):j], w)
	}) {
		return -1
	}
	// The longest key name the rule knows is 20 bytes; a folded k or s
	// takes a byte or two more.
	if credentialKeyEnd.MatchString(s[max(0, j-48):j]) {
		return j
	}
	return -1
}

// credentialKeyLastWords end every alternative of credentialKeys: a quick
// test before credentialKeyEnd.
var credentialKeyLastWords = []string{"password", "passwd", "passphrase", "pwd", "secret", "key", "token"}
