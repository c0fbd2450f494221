package sim

import (
	"crypto/sha256"
	goembed "embed"
	"encoding/hex"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// sources is the embedded model's own code: its answers are a function of
// it, so its hash is the model's version.
//
//go:embed *.go
var sources goembed.FS

// Version identifies the embedded model's behaviour: a hash of its code
// (tests excluded). It is part of every response-cache key and stage input
// that the embedded model answers, so answers cached by an older build are
// never served as this one's. A hash rather than a number to bump: any
// change to the code counts, and nobody has to remember.
var Version = sourceVersion(sources)

// sourceVersion hashes the names and contents of the non-test Go files of
// fsys, in name order, to 12 hex digits.
func sourceVersion(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "*.go")
	if err != nil {
		panic(err) // only for a malformed pattern
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		h.Write([]byte(path.Base(name) + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
