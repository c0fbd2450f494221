package env_test

import (
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/fakeenv"
)

// TestHTTPSettings: what the server is sent and how replies are read and
// scored change Settings; timeouts and retries do not.
func TestHTTPSettings(t *testing.T) {
	srv := fakeenv.NewAppWorld(fakeenv.Tasks(2), fakeenv.Options{})
	cfg := appWorldConfig(t, srv, fakeenv.Tasks(2))
	want := newHTTP(t, srv, cfg).Settings()
	for _, tc := range []struct {
		name    string
		edit    func(c *env.HTTPConfig)
		changed bool
	}{
		{"same config", func(*env.HTTPConfig) {}, false},
		{"timeout and retries", func(c *env.HTTPConfig) { c.Timeout, c.MaxRetries = time.Minute, 7 }, false},
		{"system prompt", func(c *env.HTTPConfig) { c.SystemPrompt = "Be brief." }, true},
		{"success reward", func(c *env.HTTPConfig) { c.SuccessReward = 0.5 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			tc.edit(&c)
			got := newHTTP(t, srv, c).Settings()
			if (got != want) != tc.changed {
				t.Fatalf("settings %q, base %q: changed %v, want %v", got, want, got != want, tc.changed)
			}
		})
	}
}
