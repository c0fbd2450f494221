package distill

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/rollout"
)

// secretSample is one secret of a kind, inside realistic text. The secrets
// are assembled at run time so that no scanner mistakes this file for a
// leak. leak is the part that must not survive redaction.
type secretSample struct {
	kind string
	text string
	leak string
}

func secretSamples() []secretSample {
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
	return []secretSample{
		{RedactOpenAIKey, "export OPENAI_KEY=" + openai + " # from the vault", openai},
		{RedactAnthropicKey, "client = Anthropic(api=" + anthropic + ")", anthropic},
		{RedactAWSAccessKeyID, "aws configure set id " + awsID, awsID},
		{RedactAWSSecretKey, "aws_secret_access_key = " + awsSecret, awsSecret},
		{RedactGitHubToken, "git clone with token " + github + " failed", github},
		{RedactSlackToken, "SLACK=" + slack, slack},
		{RedactGoogleAPIKey, "maps?key=" + google + "&q=berlin", google},
		{RedactBearerToken, "curl -H 'Authorization: Bearer " + bearer + "' https://api", bearer},
		{RedactJWT, "session " + jwt + " expired", jwt},
		{RedactPrivateKey, "cat id_rsa\n" + pem + "\nok", pemBody},
		{RedactPassword, "db_password=hunter2-Blue! and more", "hunter2-Blue!"},
		{RedactPassword, `{"user": "bob", "password": "c0rrect horse"}`, "c0rrect horse"},
		{RedactPassword, `{\"pwd\": \"esc4ped-json\"}`, "esc4ped-json"},
		{RedactPassword, "client_secret: s3cr3t-yaml", "s3cr3t-yaml"},
		{RedactConnectionString, "dial postgres://admin:pg-Pa55@db.internal:5432/app", "pg-Pa55"},
		{RedactEmail, "mail alice.liddell@example.org today", "alice.liddell@example.org"},
	}
}

func TestRedactorFindsEachKind(t *testing.T) {
	r := NewRedactor(true)
	for _, s := range secretSamples() {
		t.Run(s.kind, func(t *testing.T) {
			out, counts := r.Redact(s.text)
			if strings.Contains(out, s.leak) {
				t.Errorf("secret survived: %q", out)
			}
			if counts[s.kind] != 1 {
				t.Errorf("counts = %v, want one %s", counts, s.kind)
			}
			if !strings.Contains(out, "[REDACTED:"+s.kind+"]") {
				t.Errorf("no marker in %q", out)
			}
			again, more := r.Redact(out)
			if again != out || len(more) != 0 {
				t.Errorf("redacting again changed %q to %q (%v)", out, again, more)
			}
		})
	}
}

func TestRedactorKeepsContext(t *testing.T) {
	r := NewRedactor(false)
	tests := []struct {
		in, want string
	}{
		{`{"password": "hunter2"}`, `{"password": "[REDACTED:password]"}`},
		{"postgres://u:p4ss@host/db", "postgres://[REDACTED:connection_string]@host/db"},
		{"Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer [REDACTED:bearer_token]"},
		// A JWT sent as a bearer token counts once, as a JWT.
		{"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijklmno", "Bearer [REDACTED:jwt]"},
		// The generic rule leaves values an earlier rule replaced alone.
		{"api_key=sk-" + strings.Repeat("a", 24), "api_key=[REDACTED:openai_key]"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, counts := r.Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if total := sum(counts); total != 1 {
				t.Errorf("counted %v, want exactly one redaction", counts)
			}
		})
	}
}

func TestRedactorLeavesOrdinaryText(t *testing.T) {
	r := NewRedactor(false)
	for _, text := range []string{
		"Step 2: open('Tesla, Inc.') -> Founded July 1, 2003 by Martin Eberhard.",
		"the task-abcdefghijklmnopqrstuvwxyz was completed; risk-free",
		"The bearer of this letter, token of esteem, passed the password test.",
		"https://en.wikipedia.org/wiki/Mont_Blanc?x=1#History",
		"max_tokens: 512, secret_sauce recipe, key: value",
		"ASIAN markets and AKIAK village",
		"contact alice@example.org",
		"-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----",
	} {
		if got, counts := r.Redact(text); got != text {
			t.Errorf("Redact(%q) = %q (%v), want it unchanged", text, got, counts)
		}
	}
}

func TestRedactorEmailsOptional(t *testing.T) {
	text := "write to bob@example.com"
	if got, _ := NewRedactor(false).Redact(text); got != text {
		t.Errorf("without emails: %q", got)
	}
	if got, _ := NewRedactor(true).Redact(text); got != "write to [REDACTED:email]" {
		t.Errorf("with emails: %q", got)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// shapesOf writes one secret sample in every shape a secret reaches a
// trajectory in: as is, URL-encoded, split across a line break, as JSON
// inside JSON (doubly escaped), base64 of the whole text, and base64 of
// the bare secret (for kinds with a known prefix).
func shapesOf(s secretSample) map[string]string {
	half := len(s.leak) / 2
	out := map[string]string{
		"raw":            s.text,
		"url-encoded":    "GET /cb?q=" + url.QueryEscape(s.text),
		"split":          strings.Replace(s.text, s.leak, s.leak[:half]+"\n"+s.leak[half:], 1),
		"doubly escaped": jsonEscape(jsonEscape(s.text)),
		"base64":         "payload " + base64.StdEncoding.EncodeToString([]byte(s.text)),
	}
	switch s.kind {
	case RedactOpenAIKey, RedactAnthropicKey, RedactAWSAccessKeyID, RedactGitHubToken, RedactSlackToken, RedactGoogleAPIKey, RedactJWT:
		out["base64 key"] = "blob " + base64.StdEncoding.EncodeToString([]byte(s.leak)) + " end"
	}
	return out
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// decodedViews are the texts a reader could recover from out: as is,
// JSON-unescaped up to three times, URL-decoded, each also with its line
// breaks removed, and the base64 tokens of all of them decoded.
func decodedViews(out string) []string {
	views := []string{out}
	v := out
	for range 3 {
		v = identity(v).text
		v = jsonUnescaped(identity(v)).text
		views = append(views, v)
	}
	views = append(views, urlDecoded(identity(out)).text)
	for _, x := range slices.Clone(views) {
		views = append(views, linesJoined(identity(x)).text)
	}
	for _, x := range slices.Clone(views) {
		for _, tok := range base64Token.FindAllString(x, -1) {
			if d, ok := decodeBase64(tok); ok {
				views = append(views, d)
			}
		}
	}
	return views
}

// TestRedactionCorpus is the acceptance check of the exports: every shape
// of every secret kind goes through a build, and no output file, Parquet
// included, gives any of them back raw, URL-decoded, base64-decoded,
// JSON-unescaped or line-joined.
func TestRedactionCorpus(t *testing.T) {
	run := t.TempDir()
	samples := secretSamples()
	kinds := map[string]bool{}
	var trajs []rollout.Trajectory
	n := 0
	shapes := map[string]bool{}
	for _, s := range samples {
		kinds[s.kind] = true
		for shape, text := range shapesOf(s) {
			shapes[shape] = true
			ev := event(compress.KindHistory, fmt.Sprintf("observation %d (%s): %s", n, shape, text), "kept: "+text)
			trajs = append(trajs, success(fmt.Sprintf("task-%03d", n), ev))
			n++
		}
	}
	if len(kinds) < 12 {
		t.Fatalf("the corpus has %d secret kinds, want at least 12", len(kinds))
	}
	writeRun(t, run, trajs...)
	out := filepath.Join(t.TempDir(), "ds")
	if _, err := Build(t.Context(), run, out, Options{RedactEmails: true, ValidationFraction: new(0.3)}); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for path, data := range treeContents(t, out) {
		if strings.HasSuffix(path, ".parquet") {
			texts = append(texts, strings.Join(parquetStrings(t, filepath.Join(out, path)), "\n"))
			continue
		}
		texts = append(texts, string(data))
	}
	leaks := 0
	for _, text := range texts {
		views := decodedViews(text)
		for _, s := range samples {
			for _, v := range views {
				if strings.Contains(v, s.leak) {
					t.Errorf("%s secret %q is recoverable from an output", s.kind, s.leak)
					leaks++
					break
				}
			}
		}
	}
	t.Logf("%d secret kinds, %d texts in %d shapes: %d recoverable", len(kinds), n, len(shapes), leaks)
}
