//go:build unix

// Package cputime reads the CPU time the process has used, so benchmarks
// can print a figure that a busy machine does not inflate the way it
// inflates wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the user and system CPU time of the process so far (every
// thread, the garbage collector's included); ok is false where the
// platform does not tell.
func Process() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
