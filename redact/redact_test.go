package redact_test

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/redact/redacttest"
)

func TestRedactorFindsEachKind(t *testing.T) {
	r := redact.New(true)
	for _, s := range redacttest.Samples() {
		t.Run(s.Kind, func(t *testing.T) {
			out, counts := r.Redact(s.Text)
			if strings.Contains(out, s.Leak) {
				t.Errorf("secret survived: %q", out)
			}
			if counts[s.Kind] != 1 {
				t.Errorf("counts = %v, want one %s", counts, s.Kind)
			}
			if !strings.Contains(out, "[REDACTED:"+s.Kind+"]") {
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
	r := redact.New(false)
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
	r := redact.New(false)
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
	if got, _ := redact.New(false).Redact(text); got != text {
		t.Errorf("without emails: %q", got)
	}
	if got, _ := redact.New(true).Redact(text); got != "write to [REDACTED:email]" {
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

// TestRedactorCorpus puts every shape of every sample through the Redactor
// and Scrub: nothing of a secret is recoverable, each shape is counted as
// its kind (base64 tokens count as the least kind by name they hold), and
// redacting again changes nothing.
func TestRedactorCorpus(t *testing.T) {
	outputs := []struct {
		name   string
		redact func(string) (string, map[string]int)
	}{
		{"Redact", redact.New(true).Redact},
		{"Scrub", func(s string) (string, map[string]int) { return redact.Scrub(s), nil }},
	}
	for _, o := range outputs {
		for _, s := range redacttest.Samples() {
			for _, sh := range redacttest.Shapes(s) {
				t.Run(o.name+"/"+s.Kind+"/"+sh.Name, func(t *testing.T) {
					if redacttest.Recovered(sh.Text, s) == "" {
						t.Fatalf("the shape %q plants nothing to recover", sh.Text)
					}
					out, counts := o.redact(sh.Text)
					if got := redacttest.Recovered(out, s); got != "" {
						t.Fatalf("%q recoverable from %q", got, out)
					}
					if counts != nil && sum(counts) == 0 {
						t.Errorf("counts %v, want the secret counted", counts)
					}
					if again, _ := o.redact(out); again != out {
						t.Errorf("redacting again changed %q to %q", out, again)
					}
				})
			}
		}
	}
}
