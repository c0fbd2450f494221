package serve

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleConfigIsValid(t *testing.T) {
	// The example is valid with no key variable set: its endpoints are the
	// embedded model (TestExampleConfigServes starts it).
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	cfg, err := LoadConfig(filepath.Join("..", "serve.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Compression.Threshold != 4096 || cfg.Upstream.Anthropic.BaseURL != "embedded" || cfg.Compressor.Teacher.KeyEnv != "" {
		t.Errorf("example not read: %+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown field", "listen: 127.0.0.1:1\nupstream:\n  openai:\n    base_url: http://x/v1\n    api_key: sk-123\n", "line 5: field api_key not found"},
		{"no upstream", "compression:\n  registry: r\nauth:\n  anonymous: true\n", "upstream.openai.base_url: must not be empty"},
		{"raw key", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\nauth:\n  key_hashes: [sk-live-secret]\n", "auth.key_hashes[0]: is not sha256"},
		{"no auth", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\n", "auth: no client keys"},
		{"key in url", "upstream:\n  openai:\n    base_url: http://u:p@x/v1\ncompression:\n  registry: r\nauth:\n  anonymous: true\n", "must carry no credentials"},
		{"trigger", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\n  trigger: 2\nauth:\n  anonymous: true\n", "line 6: field compression.trigger: 2 is not a fraction"},
		{"threshold 0", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\n  threshold: 0\nauth:\n  anonymous: true\n", "line 6: field compression.threshold: must be a positive"},
		{"key variable unset", "upstream:\n  openai:\n    base_url: http://x/v1\n    key_env: CTXOPT_TEST_UNSET_KEY\ncompression:\n  registry: r\nauth:\n  anonymous: true\n", "line 4: field upstream.openai.key_env: variable CTXOPT_TEST_UNSET_KEY is not set"},
		{"keep_tokens", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\n  keep_tokens: -2\nauth:\n  anonymous: true\n", "line 6: field compression.keep_tokens: must be -1 (every turn verbatim), 0 (3/8 of compression.threshold) or a token count"},
		{"max_tokens", "upstream:\n  openai:\n    base_url: http://x/v1\ncompression:\n  registry: r\ncompressor:\n  teacher:\n    base_url: http://y/v1\n    model: m\n    timeout: 1m\n    max_tokens: -5\nauth:\n  anonymous: true\n", "line 11: field compressor.teacher.max_tokens: -5 is out of range"},
		{"empty file", "", "is empty"},
		{"comments only", "# todo\n", "holds only comments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "serve.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Errorf("the error echoes a secret: %v", err)
			}
		})
	}
}

func TestSettingsOverride(t *testing.T) {
	cfg := Default()
	set := map[string]string{}
	for _, s := range cfg.Settings() {
		set[s.Name] = s.Env
	}
	for name, env := range map[string]string{
		"compression.threshold":   "CTXOPT_SERVE_COMPRESSION_THRESHOLD",
		"upstream.openai.key_env": "CTXOPT_SERVE_UPSTREAM_OPENAI_KEY_ENV",
		"auth.key_hashes":         "CTXOPT_SERVE_AUTH_KEY_HASHES",
		"timeouts.drain":          "CTXOPT_SERVE_TIMEOUTS_DRAIN",
	} {
		if set[name] != env {
			t.Errorf("setting %s: env %q, want %s", name, set[name], env)
		}
	}
	if len(set) < 40 {
		t.Errorf("only %d settings: every field must be one", len(set))
	}
	for _, c := range []struct{ name, value string }{
		{"compression.threshold", "123"}, {"compression.trigger", "0.5"}, {"timeouts.drain", "3s"},
		{"auth.anonymous", "true"}, {"auth.key_hashes", "sha256:a, sha256:b"}, {"listen", "127.0.0.1:9"},
	} {
		for _, s := range cfg.Settings() {
			if s.Name == c.name {
				if err := s.Set(c.value); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if cfg.Compression.Threshold != 123 || cfg.Compression.Trigger != 0.5 || cfg.Timeouts.Drain != 3*time.Second ||
		!cfg.Auth.Anonymous || len(cfg.Auth.KeyHashes) != 2 || cfg.Listen != "127.0.0.1:9" {
		t.Errorf("settings not applied: %+v", cfg)
	}
	for _, s := range cfg.Settings() {
		if s.Name == "compression.threshold" {
			if err := s.Set("many"); err == nil || !strings.Contains(err.Error(), "compression.threshold") {
				t.Errorf("bad value: %v", err)
			}
		}
	}
}

func TestKeysFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	if err := os.WriteFile(good, []byte("# team A\n"+HashKey("a-key")+"  # ci\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := loadKeyring(Auth{KeysFile: good})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"a-key": true, "b-key": false, "": false} {
		r := httptest.NewRequest("POST", "/v1/messages", nil)
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		if _, ok := k.check(r); ok != want {
			t.Errorf("key %q: accepted %v, want %v", key, ok, want)
		}
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(HashKey("a")+"\nsk-raw-key-pasted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadKeyring(Auth{KeysFile: bad})
	if err == nil || !strings.Contains(err.Error(), bad+":2:") || strings.Contains(err.Error(), "sk-raw") {
		t.Errorf("bad keys file: %v", err)
	}
}

func TestKeptTokens(t *testing.T) {
	for _, c := range []struct{ threshold, keep, want int }{
		{8000, 0, 3000}, // the default: 3/8 of the threshold
		{4096, 0, 1536},
		{8000, 2000, 2000},
		{8000, -1, 0}, // unbounded: every turn verbatim
	} {
		if got := (Compression{Threshold: c.threshold, KeepTokens: c.keep}).keptTokens(); got != c.want {
			t.Errorf("threshold %d keep_tokens %d: %d in effect, want %d", c.threshold, c.keep, got, c.want)
		}
	}
}
