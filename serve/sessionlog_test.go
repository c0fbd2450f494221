package serve

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/ingest"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/rollout"
)

// TestSessionLogFeedsDistill closes the loop: two production conversations
// are logged, one reported successful; optimize distill's library reads the
// log as a run and trains only on the successful one's compressions.
func TestSessionLogFeedsDistill(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	cfg.SessionLog.Dir = t.TempDir()
	srv, url := start(t, cfg)
	var sessions []string
	for _, tag := range []string{"good", "unknown"} {
		resp, b := post(t, url+"/v1/chat/completions", toolConversation(5, tag), nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "true" {
			t.Fatalf("status %d compressed %s: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
		}
		sessions = append(sessions, resp.Header.Get(HeaderSession))
	}
	for _, c := range []struct {
		id   string
		body string
		want int
	}{
		{sessions[0], `{"success": true}`, http.StatusNoContent},
		{sessions[0], `{"success": true}`, http.StatusNotFound}, // already written
		{"nope", `{"success": true}`, http.StatusNotFound},
		{sessions[1], `{"ok": 1}`, http.StatusBadRequest},
	} {
		if resp, b := post(t, url+"/v1/sessions/"+c.id+"/outcome", []byte(c.body), nil); resp.StatusCode != c.want {
			t.Errorf("outcome %s %s: status %d, want %d: %s", c.id, c.body, resp.StatusCode, c.want, b)
		}
	}
	// Shutdown writes the session whose outcome is unknown.
	srv.comp.close()
	if err := srv.slog.close(); err != nil {
		t.Fatal(err)
	}
	srv.slog = nil
	logFile := filepath.Join(cfg.SessionLog.Dir, SessionLogFile)
	trajs, err := rollout.ReadTrajectories(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 2 || !trajs[0].Success || trajs[1].Success || len(trajs[0].Events) == 0 || len(trajs[0].Turns) == 0 {
		t.Fatalf("session log: %d trajectories: %+v", len(trajs), trajs)
	}
	m, err := distill.Build(t.Context(), cfg.SessionLog.Dir, t.TempDir(), distill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows.Kept != len(trajs[0].Events) || m.Trajectories.Successful != 1 {
		t.Errorf("distill kept %d rows from %d successful sessions; want the %d events of the successful one", m.Rows.Kept, m.Trajectories.Successful, len(trajs[0].Events))
	}

	// optimize import reads it as ctxopt records, relabelled by session id,
	// for optimize run's sources.
	labels := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(labels, []byte(`{"session": "`+sessions[1]+`", "success": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := ingest.Import(t.Context(), ingest.Options{Format: ingest.FormatCtxopt, In: logFile, Out: t.TempDir(), Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sessions != 2 || rep.Labeled != 1 || rep.Summary.Successes != 2 {
		t.Errorf("import: %d sessions, %d labeled, %d successes; want 2, 1, 2", rep.Sessions, rep.Labeled, rep.Summary.Successes)
	}
}

// TestSessionLogIndexFollowsAppends reads the session log as a rollout
// directory while serve keeps appending to it: the index the first read
// leaves behind must not hide the sessions written after it.
func TestSessionLogIndexFollowsAppends(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	cfg.SessionLog.Dir = t.TempDir()
	_, url := start(t, cfg)
	var want []string
	for _, tag := range []string{"first", "second"} {
		resp, b := post(t, url+"/v1/chat/completions", toolConversation(5, tag), nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "true" {
			t.Fatalf("%s: status %d compressed %s: %s", tag, resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
		}
		id := resp.Header.Get(HeaderSession)
		if resp, b := post(t, url+"/v1/sessions/"+id+"/outcome", []byte(`{"success": true}`), nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: outcome: status %d: %s", tag, resp.StatusCode, b)
		}
		want = append(want, id)
		outs, err := rollout.ReadIndex(cfg.SessionLog.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range outs {
			got = append(got, o.TaskID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after %s: the index lists sessions %v, want %v", tag, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.SessionLog.Dir, rollout.IndexFile)); err != nil {
		t.Errorf("no index left for the next reader: %v", err)
	}
}

// TestSessionLogCutsTornLine restarts serve on a session log that a crash
// left with a torn last line: it is cut off with a warning naming the file
// and line, and the sessions logged next are read back whole.
func TestSessionLogCutsTornLine(t *testing.T) {
	logs := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	cfg.SessionLog.Dir = t.TempDir()
	logFile := filepath.Join(cfg.SessionLog.Dir, SessionLogFile)
	old, err := rollout.EncodeTrajectory(&rollout.Trajectory{TaskID: "before-the-crash", Split: SessionSplit})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, append(append(old, '\n'), old[:len(old)/2]...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url, stop := launch(t, cfg)
	resp, b := post(t, url+"/v1/chat/completions", toolConversation(5, "after"), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "true" {
		t.Fatalf("status %d compressed %s: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if want := "file=" + logFile + " line=2"; !strings.Contains(logs.String(), want) {
		t.Errorf("no warning naming %s: %s", want, logs.String())
	}
	trajs, err := rollout.ReadTrajectories(logFile)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := rollout.ReadIndex(cfg.SessionLog.Dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"before-the-crash", resp.Header.Get(HeaderSession)}
	var got, indexed []string
	for i := range trajs {
		got = append(got, trajs[i].TaskID)
	}
	for _, o := range outs {
		indexed = append(indexed, o.TaskID)
	}
	if !slices.Equal(got, want) || !slices.Equal(indexed, want) {
		t.Errorf("records %v, index %v, want %v", got, indexed, want)
	}
}
