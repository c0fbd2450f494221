//go:build !unix

package cputime

import "time"

// Process reports no CPU time on this platform.
func Process() (time.Duration, bool) { return 0, false }
