// Package redacttest is the corpus of planted secrets every output that
// may carry user text is checked against: one or more samples of each
// secret kind, the shapes a secret reaches an output in, and what a reader
// can recover from an output.
package redacttest

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/redact"
)

// Sample is one secret of a kind inside realistic text. Leak is the part
// that must not survive redaction.
type Sample struct {
	Kind, Text, Leak string
}

// Samples returns the corpus: every kind of redact.Kinds, the password kind
// in four notations. The secrets are assembled at run time so that no
// scanner mistakes the source for a leak.
func Samples() []Sample {
	rep := strings.Repeat
	openai := "sk-proj-" + rep("Q7wLm2Xp", 6)
	anthropic := "sk-ant-api03-" + rep("Zx9_Kq4-", 10)
	awsID := "AKIA" + "Q4ZT7XKD2M9PLR6B"
	awsSecret := "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY01"
	github := "ghp_" + rep("a1B2c3D4e5F6", 3)
	slack := "xoxb-" + "2847561930-" + "9920183746-" + "QwErTy123"
	google := "AIza" + "SyD8" + rep("k3Jq", 7) + "x9Z"
	bearer := "Tk7" + rep("h2Lw", 6)
	jwt := "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	pemBody := "MIIEowIBAAKCAQEA" + rep("u1SU1LfVLPHCozMxH2Mo", 3)
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + pemBody + "\n" + rep("Zq", 30) + "\n-----END RSA PRIVATE KEY-----"
	return []Sample{
		{redact.OpenAIKey, "export OPENAI_KEY=" + openai + " # from the vault", openai},
		{redact.AnthropicKey, "client = Anthropic(api=" + anthropic + ")", anthropic},
		{redact.AWSAccessKeyID, "aws configure set id " + awsID, awsID},
		{redact.AWSSecretKey, "aws_secret_access_key = " + awsSecret, awsSecret},
		{redact.GitHubToken, "git clone with token " + github + " failed", github},
		{redact.SlackToken, "SLACK=" + slack, slack},
		{redact.GoogleAPIKey, "maps?key=" + google + "&q=berlin", google},
		{redact.BearerToken, "curl -H 'Authorization: Bearer " + bearer + "' https://api", bearer},
		{redact.JWT, "session " + jwt + " expired", jwt},
		{redact.PrivateKey, "cat id_rsa\n" + pem + "\nok", pemBody},
		{redact.Password, "db_password=hunter2-Blue! and more", "hunter2-Blue!"},
		{redact.Password, `{"user": "bob", "password": "c0rrect horse"}`, "c0rrect horse"},
		{redact.Password, `{\"pwd\": \"esc4ped-json\"}`, "esc4ped-json"},
		{redact.Password, "client_secret: s3cr3t-yaml", "s3cr3t-yaml"},
		{redact.ConnectionString, "dial postgres://admin:pg-Pa55@db.internal:5432/app", "pg-Pa55"},
		{redact.Email, "mail alice.liddell@example.org today", "alice.liddell@example.org"},
	}
}

// Shape is a sample written the way it reaches an output.
type Shape struct {
	Name, Text string
}

// Shapes writes a sample in every shape a secret reaches a trajectory in:
// as is; URL-encoded as a query value; as the password and as the whole
// percent-encoded user-info of a URL; split across a line break (LF and
// CRLF); as JSON inside JSON (doubly escaped); base64 of the whole text;
// and base64 of the bare secret (for kinds with a known prefix).
func Shapes(s Sample) []Shape {
	half := len(s.Leak) / 2
	// A split secret is followed by another line, as in a longer text.
	split := func(sep string) string {
		return strings.Replace(s.Text, s.Leak, s.Leak[:half]+sep+s.Leak[half:], 1) + sep + "Then the next step."
	}
	shapes := []Shape{
		{"raw", s.Text},
		{"url-encoded", "GET /cb?q=" + url.QueryEscape(s.Text) + "&page=2"},
		{"userinfo", "clone https://" + url.UserPassword("deploy", s.Text).String() + "@git.internal/repo.git"},
		{"userinfo escaped", "open https://" + url.QueryEscape("svc:"+s.Leak) + "@db.internal/app"},
		{"split", split("\n")},
		{"split crlf", split("\r\n")},
		{"doubly escaped", jsonEscape(jsonEscape(s.Text))},
		{"base64", "payload " + base64.StdEncoding.EncodeToString([]byte(s.Text))},
	}
	switch s.Kind {
	case redact.OpenAIKey, redact.AnthropicKey, redact.AWSAccessKeyID, redact.GitHubToken, redact.SlackToken, redact.GoogleAPIKey, redact.JWT:
		shapes = append(shapes, Shape{"base64 key", "blob " + base64.StdEncoding.EncodeToString([]byte(s.Leak)) + " end"})
	}
	return shapes
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// FragmentLen is the length of the shortest piece of a secret an output
// must not hold.
const FragmentLen = 10

// Decoded is an output as a reader can decode it: as it is,
// JSON-unescaped up to three times, URL-decoded, each also with its line
// breaks removed, and the base64 tokens of all of those decoded.
type Decoded struct {
	views []string
	// found holds the pieces FragmentLen long of the corpus' secrets
	// (fragments) that some view holds, found in one pass over the views:
	// looking for every piece of every sample with strings.Contains took
	// most of the race-enabled acceptance tests' CPU.
	found map[string]bool
}

// Decode decodes an output once, for the samples to be looked for in it.
func Decode(out string) Decoded {
	d := Decoded{views: decodedViews(out), found: map[string]bool{}}
	for _, v := range d.views {
		fragmentsIn(v, d.found)
	}
	return d
}

// Recovered returns what of s's secret a reader can recover from d: the
// secret, or a piece of it FragmentLen long (the whole secret when it is
// shorter); "" when nothing.
func (d Decoded) Recovered(s Sample) string {
	if clean, known := d.noFragmentOf(s.Leak); known && clean {
		// No piece of the secret is in a view, so neither is the secret.
		return ""
	}
	return scan(d.views, s.Leak)
}

// scan is Recovered looking for leak and each of its pieces in every view.
func scan(views []string, leak string) string {
	for _, v := range views {
		if strings.Contains(v, leak) {
			return leak
		}
	}
	for i := 0; i+FragmentLen <= len(leak); i++ {
		frag := leak[i : i+FragmentLen]
		for _, v := range views {
			if strings.Contains(v, frag) {
				return frag
			}
		}
	}
	return ""
}

// noFragmentOf reports whether d's views hold no piece of leak FragmentLen
// long; known is false when d cannot tell without scanning (a secret
// shorter than FragmentLen, or one not of the corpus).
func (d Decoded) noFragmentOf(leak string) (clean, known bool) {
	if len(leak) < FragmentLen {
		return false, false
	}
	for i := 0; i+FragmentLen <= len(leak); i++ {
		frag := leak[i : i+FragmentLen]
		if _, ok := corpusFragments.set[frag]; !ok {
			return false, false
		}
		if d.found[frag] {
			return false, true
		}
	}
	return true, true
}

// fragmentTable is every piece FragmentLen long of the corpus' secrets,
// with a filter on their rolling hashes that lets a scan skip almost
// every window of a text without a map look-up.
type fragmentTable struct {
	set    map[string]struct{}
	filter [1 << 16 / 64]uint64
}

// fragBase is the rolling hash's multiplier; fragOut is fragBase to the
// power FragmentLen, which takes a window's first byte out of its hash.
const fragBase = 16777619

var fragOut = func() uint32 {
	p := uint32(1)
	for range FragmentLen {
		p *= fragBase
	}
	return p
}()

var corpusFragments = func() *fragmentTable {
	t := &fragmentTable{set: map[string]struct{}{}}
	for _, s := range Samples() {
		for i := 0; i+FragmentLen <= len(s.Leak); i++ {
			frag := s.Leak[i : i+FragmentLen]
			t.set[frag] = struct{}{}
			var h uint32
			for j := range FragmentLen {
				h = h*fragBase + uint32(frag[j])
			}
			t.filter[(h>>16)/64] |= 1 << ((h >> 16) % 64)
		}
	}
	return t
}()

// fragmentsIn adds to found the corpus fragments that v holds.
func fragmentsIn(v string, found map[string]bool) {
	t := corpusFragments
	var h uint32
	for i := range len(v) {
		h = h*fragBase + uint32(v[i])
		if i < FragmentLen-1 {
			continue
		}
		if i >= FragmentLen {
			h -= fragOut * uint32(v[i-FragmentLen])
		}
		if t.filter[(h>>16)/64]&(1<<((h>>16)%64)) == 0 {
			continue
		}
		w := v[i+1-FragmentLen : i+1]
		if _, ok := t.set[w]; ok {
			found[w] = true
		}
	}
}

// Recovered is Decode(out).Recovered(s).
func Recovered(out string, s Sample) string { return Decode(out).Recovered(s) }

var (
	jsonEscapes = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\r`, "\r", `\"`, `"`, `\\`, `\`, `\/`, "/")
	lineBreaks  = strings.NewReplacer("\r", "", "\n", "")
	percent     = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)
)

// minBase64Token is the length from which a run of base64 characters is
// decoded.
const minBase64Token = 16

// base64Tokens returns what the regular expression
// [A-Za-z0-9+/_\-]{16,}={0,2} finds in s (FindAllString), scanned by hand:
// the regexp took most of the race-enabled redaction tests' minutes on
// outputs of a few megabytes.
func base64Tokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isBase64Char(s[j]) {
			j++
		}
		if j-i < minBase64Token {
			i = max(j, i+1)
			continue
		}
		for k := 0; k < 2 && j < len(s) && s[j] == '='; k++ {
			j++
		}
		toks = append(toks, s[i:j])
		i = j
	}
	return toks
}

func isBase64Char(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// decodedViews are the texts a reader could recover from out.
// A view equal to one already there is left out: it could recover nothing
// more, and most outputs have nothing to unescape or no line break.
func decodedViews(out string) []string {
	views, seen := []string{out}, map[string]bool{out: true}
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			views = append(views, v)
		}
	}
	v := out
	for range 3 {
		v = jsonEscapes.Replace(v)
		add(v)
	}
	add(urlDecode(out))
	for _, x := range slices.Clone(views) {
		add(lineBreaks.Replace(x))
	}
	for _, x := range slices.Clone(views) {
		for _, tok := range base64Tokens(x) {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
				if d, err := enc.DecodeString(tok); err == nil {
					add(string(d))
				}
			}
		}
	}
	return views
}

// urlDecode decodes every %XX and + of s, leaving malformed escapes as
// they are (url.QueryUnescape gives up on the first).
func urlDecode(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	return percent.ReplaceAllStringFunc(s, func(e string) string {
		d, _ := url.PathUnescape(e)
		return d
	})
}
