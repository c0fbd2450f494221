package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm/embedded"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{
		{"unstamped", debug.BuildInfo{GoVersion: "go1.26.8"},
			Info{Version: devel, Revision: devel, GoVersion: "go1.26.8", EmbeddedModel: embedded.Version}},
		{"release", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.8", EmbeddedModel: embedded.Version}},
		{"dirty", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: devel},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: devel, Revision: "abc123", Modified: true, GoVersion: "go1.26.8", EmbeddedModel: embedded.Version}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi); got != tt.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "abc123", Modified: true, GoVersion: "go1.26.8", EmbeddedModel: "m1"}
	s := i.String()
	for _, want := range []string{"optimize v1.2.3\n", "revision: abc123-dirty\n", "go: go1.26.8\n", "embedded model: m1\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want it to contain %q", s, want)
		}
	}
}
