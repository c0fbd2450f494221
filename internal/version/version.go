// Package version is the build's identity: the module version and VCS
// revision Go stamps into the binary, and the embedded model's version.
// `optimize version`, the start-up log line and serve's ctxopt_build_info
// gauge all read it here, so they never disagree.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/ctxopt/ctxopt/llm/embedded"
)

// devel is what Go reports, and what we report, when a value was not
// stamped: `go run`, `go test`, a build outside a VCS checkout.
const devel = "(devel)"

// Info is one build's identity.
type Info struct {
	Version       string // module version, e.g. v0.3.1, or (devel)
	Revision      string // VCS commit, or (devel)
	Modified      bool   // the working tree had uncommitted changes
	GoVersion     string
	EmbeddedModel string // llm/embedded.Version
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, Revision: devel, GoVersion: bi.GoVersion, EmbeddedModel: embedded.Version}
	if info.Version == "" {
		info.Version = devel
	}
	if info.GoVersion == "" {
		info.GoVersion = runtime.Version()
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// RevisionLabel is the revision with "-dirty" appended when the tree was
// modified: one value for a log field or a metric label.
func (i Info) RevisionLabel() string {
	if i.Modified {
		return i.Revision + "-dirty"
	}
	return i.Revision
}

// String is the text `optimize --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("optimize %s\nrevision: %s\ngo: %s\nembedded model: %s\n",
		i.Version, i.RevisionLabel(), i.GoVersion, i.EmbeddedModel)
}
