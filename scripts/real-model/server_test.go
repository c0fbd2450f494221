// Package realmodel tests the shell functions of make real that need no
// Python and no model (the rest runs only in make real).
package realmodel

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// As a fake server, the test binary listens on 127.0.0.1:$FAKE_SERVER_PORT
// and answers /health; FAKE_SERVER_IGNORE_TERM makes it ignore SIGTERM.
func TestMain(m *testing.M) {
	if port := os.Getenv("FAKE_SERVER_PORT"); port != "" {
		if os.Getenv("FAKE_SERVER_IGNORE_TERM") != "" {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Fprintln(os.Stderr, http.ListenAndServe("127.0.0.1:"+port, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, `{"status":"ok"}`)
		})))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// make real once left llama.cpp running after it finished: the server was
// started through a shell function, so the pid it signalled was a
// subshell's. stop_server must leave nothing listening, say so when
// something still is, and never hang on a server that ignores SIGTERM.
func TestStopServer(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	tests := []struct {
		name    string
		start   string // how the script starts the server; $FAKE is this binary
		env     []string
		wantRC  int
		wantErr string
		// outlives is true when stop_server cannot stop the server, only
		// report it (the test's cleanup kills it).
		outlives bool
	}{
		{"exits on SIGTERM", `start_server "$dir/out" "$dir/log" "$FAKE"`, nil, 0, "", false},
		{"ignores SIGTERM", `start_server "$dir/out" "$dir/log" "$FAKE"`, []string{"FAKE_SERVER_IGNORE_TERM=1", "STOP_TIMEOUT=1"}, 1, "still running 1 s after SIGTERM; killed", false},
		// The old bug: what was signalled was a wrapper; the server outlives it.
		{"wrapper process", `start_server "$dir/out" "$dir/log" bash -c '"$FAKE" & wait'`, nil, 1, "still answers on 127.0.0.1:", true},
		{"shell function refused", `serve() { "$FAKE"; }; start_server "$dir/out" "$dir/log" serve || exit 3`, nil, 3, "serve is not a program (a function)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			script := `set -u
source server.sh
dir=$1
` + tt.start + `
for i in $(seq 100); do port_open $FAKE_SERVER_PORT && break; sleep 0.1; done
port_open $FAKE_SERVER_PORT || { echo "the fake server did not start" >&2; exit 9; }
stop_server $FAKE_SERVER_PORT
`
			cmd := exec.Command("bash", "-c", script, "test", t.TempDir())
			cmd.Env = append(os.Environ(), append(tt.env, "FAKE="+os.Args[0], "FAKE_SERVER_PORT="+strconv.Itoa(port))...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			// Its own process group, killed at the end: a server that
			// outlived the script goes with it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("the script hung; stderr:\n%s", stderr.String())
			}
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if rc != tt.wantRC || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", rc, stderr.String(), tt.wantRC, tt.wantErr)
			}
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err == nil {
				c.Close()
			}
			if listening := err == nil; listening != tt.outlives {
				t.Errorf("after the script, a server listens on port %d: %v, want %v", port, listening, tt.outlives)
			}
		})
	}
}
