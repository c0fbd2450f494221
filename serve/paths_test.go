package serve

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// pathCheck is the tests' transport: it reads every error response the
// server gives any test and records those whose body names a directory of
// this machine (the temporary directories the tests' registries and logs
// live in, the working directory, the home directory). TestMain fails the
// package on any, so no serve test's actual error body holds a path.
type pathCheck struct {
	inner *http.Transport
}

var (
	leakMu sync.Mutex
	leaks  []string
)

func (p *pathCheck) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.inner.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return resp, nil // the test reading the body sees the short read
	}
	if root := pathIn(b); root != "" {
		leakMu.Lock()
		leaks = append(leaks, fmt.Sprintf("%s %s: %d: the body names %s: %s", r.Method, r.URL.Path, resp.StatusCode, root, b))
		leakMu.Unlock()
	}
	return resp, nil
}

func (p *pathCheck) CloseIdleConnections() { p.inner.CloseIdleConnections() }

// pathIn returns the first directory of this machine that b names, or "".
func pathIn(b []byte) string {
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	for _, root := range []string{os.TempDir(), wd, filepath.Dir(wd), home} {
		if root != "" && root != "/" && bytes.Contains(b, []byte(root)) {
			return root
		}
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d error bodies name a path of the machine:\n%s\n", len(leaks), strings.Join(leaks, "\n"))
		code = 1
	}
	os.Exit(code)
}

// TestPathCheck: the check sees a path where one is, so the package's
// clean run means something.
func TestPathCheck(t *testing.T) {
	dir := t.TempDir()
	if pathIn([]byte(`{"error":{"message":"guideline id \"h-1\" in `+dir+`: not found"}}`)) == "" {
		t.Errorf("a body naming %s passed", dir)
	}
	if root := pathIn([]byte(`{"error":{"message":"POST /v1/compress: guideline id \"h-1\": guideline not found"}}`)); root != "" {
		t.Errorf("a body without a path failed: %s", root)
	}
}

// TestUnknownGuidelineNamesNoPath: a well-formed id the registry lacks is
// a 404 naming the id, not the registry's directory.
func TestUnknownGuidelineNamesNoPath(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	resp, b := post(t, url+"/v1/compress", []byte(`{"messages":[{"role":"user","content":"hi"}],"guideline":"h-000000000000"}`), nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `id \"h-000000000000\": guideline not found`) || strings.Contains(string(b), dir) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestInvalidUTF8Body: a body that is not UTF-8 is a 400 in the API's own
// error shape, and never reaches the upstream.
func TestInvalidUTF8Body(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	body := []byte("{\"model\":\"m\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":\"hi \xff\xfe\"}]}")
	for _, tc := range []struct{ path, shape string }{
		{"/v1/chat/completions", `{"error":{"code":null,"message":"body is not valid UTF-8: invalid byte at offset 70","type":"invalid_request_error"}}`},
		{"/v1/messages", `{"error":{"message":"body is not valid UTF-8: invalid byte at offset 70","type":"invalid_request_error"},"type":"error"}`},
		{"/v1/compress", `{"error":{"code":null,"message":"body is not valid UTF-8: invalid byte at offset 70","type":"invalid_request_error"}}`},
	} {
		resp, b := post(t, url+tc.path, body, nil)
		if resp.StatusCode != http.StatusBadRequest || string(b) != tc.shape {
			t.Errorf("%s: %d %s, want 400 %s", tc.path, resp.StatusCode, b, tc.shape)
		}
	}
	// The answers came before any upstream call would have.
	up.mu.Lock()
	n := len(up.bodies)
	up.mu.Unlock()
	if n != 0 {
		t.Errorf("%d invalid bodies reached the upstream", n)
	}
	if n := metric(t, url, `ctxopt_serve_rejected_total{reason="encoding"}`); n != 3 {
		t.Errorf("rejected for encoding: %v, want 3", n)
	}
}

// TestMetricsAuth: metrics.auth key asks for a client key, none (the
// default) does not.
func TestMetricsAuth(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	for _, tc := range []struct {
		auth   string
		key    string
		status int
	}{
		{MetricsAuthNone, "", 200},
		{MetricsAuthKey, "", 401},
		{MetricsAuthKey, "wrong", 401},
		{MetricsAuthKey, "sekrit", 200},
	} {
		t.Run(tc.auth+"/"+tc.key, func(t *testing.T) {
			cfg := testConfig(t, up.url(), up.url(), dir)
			cfg.Auth.Anonymous = false
			cfg.Auth.KeyHashes = []string{HashKey("sekrit")}
			cfg.Metrics.Auth = tc.auth
			_, url := start(t, cfg)
			req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (tc.status == 200) != strings.Contains(string(b), "ctxopt_serve_") {
				t.Errorf("%d %.200s, want %d", resp.StatusCode, b, tc.status)
			}
		})
	}
}
