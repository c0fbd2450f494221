// Package killpoint lets a test kill the process at a named point of a
// long command, as SIGKILL would at any moment, so resuming from there can
// be tested. Nothing happens unless the environment variable Env names the
// point: `CTXOPT_KILL_AT=NAME` kills at the first time NAME is reached,
// `NAME:N` at the N-th. It is for tests only; the README lists the points.
package killpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env is the environment variable naming the point to die at.
const Env = "CTXOPT_KILL_AT"

var (
	mu      sync.Mutex
	reached = map[string]int{}
)

// Reach kills the process with SIGKILL when Env names this point and
// this is the reach it counts to.
func Reach(name string) {
	want, ok := os.LookupEnv(Env)
	if !ok {
		return
	}
	point, count, _ := strings.Cut(want, ":")
	if point != name {
		return
	}
	n := 1
	if count != "" {
		if v, err := strconv.Atoi(count); err == nil {
			n = v
		}
	}
	mu.Lock()
	reached[name]++
	hit := reached[name] == n
	mu.Unlock()
	if hit {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; do not go on meanwhile
	}
}
