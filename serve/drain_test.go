package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/internal/logtest"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/rollout"
)

// TestDrainDeadlineCutsBeforeClosing holds a request in a synchronous
// summary past the drain's deadline: Serve must cut its connection and wait
// for its handler before it closes the session store and log, so the
// summary the teacher sends once released writes nowhere closed.
func TestDrainDeadlineCutsBeforeClosing(t *testing.T) {
	logs := logtest.Capture(t, slog.LevelInfo)

	up := newRecUpstream(t, sim.Config{})
	sm, err := sim.NewHandler(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The teacher takes the summary call and answers only once released.
	called, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	teacher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get(llm.RoleHeader) != "" {
			once.Do(func() { close(called) })
			<-release
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		sm.ServeHTTP(w, r)
	}))
	// Registered after the teacher's Close, so it runs first: a blocked
	// handler must not hold the teacher open when the test fails early.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(teacher.Close)
	t.Cleanup(releaseOnce)

	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), teacher.URL+"/v1", dir)
	cfg.SessionLog.Dir = t.TempDir()
	cfg.Sessions.Path = filepath.Join(t.TempDir(), "sessions.db")
	cfg.Timeouts.Drain = 200 * time.Millisecond
	srv, url, stop := launch(t, cfg)

	// Long enough to be summarized before it goes on, with no summary yet.
	res := make(chan error, 1)
	go func() {
		_, _, err := send(url+"/v1/chat/completions", toolConversation(4, "cut"), nil)
		res <- err // the connection may be cut: any ending will do
	}()
	select {
	case <-called:
	case err := <-res:
		t.Fatalf("the request ended before its summary was asked for: %v", err)
	}
	if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("serve returned %v, want the drain's deadline", err)
	}
	releaseOnce()
	<-res

	if !strings.Contains(logs.String(), `msg="drain ran out: cut the requests still in flight" requests=1`) {
		t.Errorf("the cut request was not logged:\n%s", logs)
	}
	if s := logs.String(); strings.Contains(s, "session store write") || strings.Contains(s, "session log write") {
		t.Errorf("a handler wrote to a closed store or log:\n%s", s)
	}
	srv.slog.mu.Lock()
	lost := len(srv.slog.open)
	srv.slog.mu.Unlock()
	if lost != 0 {
		t.Errorf("%d sessions were logged after the session log closed (lost)", lost)
	}
	logFile := filepath.Join(cfg.SessionLog.Dir, SessionLogFile)
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("the session log's last line is torn: %q", b[max(0, len(b)-80):])
	}
	if _, err := rollout.ReadTrajectories(logFile); err != nil {
		t.Errorf("session log: %v", err)
	}
	st, err := openStore(cfg.Sessions.Path, cfg.Sessions.TTL, cfg.Sessions.Max)
	if err != nil {
		t.Fatalf("the session store does not reopen: %v", err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
}
