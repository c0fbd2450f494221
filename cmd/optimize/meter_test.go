package main

import (
	"strings"
	"testing"
)

// TestMeterBadFlags: optimize meter refuses to start without what makes
// it a closed proxy, and optimize worker a meter URL it cannot use; each
// exits 2 naming the flag.
func TestMeterBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no upstream", []string{"meter", "--store", "file:///tmp/runs/"}, "--upstream"},
		{"no store", []string{"meter", "--upstream", "http://127.0.0.1:8080/v1"}, "--store"},
		{"upstream not http", []string{"meter", "--upstream", "ftp://127.0.0.1/v1", "--store", "file:///tmp/runs/"}, "--upstream"},
		{"store traversing", []string{"meter", "--upstream", "http://127.0.0.1:8080/v1", "--store", "file:///tmp/runs/../etc/"}, "--store"},
		{"listen address bad", []string{"meter", "--upstream", "http://127.0.0.1:8080/v1", "--store", "file:///tmp/runs/", "--listen", "127.0.0.1:-1"}, "--listen"},
		{"argument", []string{"meter", "extra"}, "takes only flags"},
		{"worker meter with a query", []string{"worker", "--meter", "http://127.0.0.1:8790/?x=1"}, "--meter"},
		{"worker meter with a path", []string{"worker", "--meter", "http://127.0.0.1:8790/meter"}, "--meter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitUsage, tc.want, stderr)
			}
		})
	}
}
