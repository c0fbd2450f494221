// Package datasets bundles the task sets and corpora of the built-in
// environments, so the binary works from any directory.
package datasets

import (
	"embed"
	"io/fs"
)

//go:generate go run ./qa/gen -seed 42 -out qa -train 100 -test 100

//go:embed qa/*.jsonl qa/VERSION
var files embed.FS

// QA returns the qa dataset (corpus.jsonl, train.jsonl, test.jsonl and
// VERSION) rooted at its directory.
func QA() fs.FS {
	sub, err := fs.Sub(files, "qa")
	if err != nil {
		// fs.Sub fails only on an invalid path, and "qa" is valid.
		panic(err)
	}
	return sub
}
