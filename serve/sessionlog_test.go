package serve

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/ingest"
	"github.com/ctxopt/ctxopt/internal/logtest"
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

// TestSessionLogTail restarts serve on session logs a crash can leave,
// and a damaged one: the last line is kept or cut off by the rule every
// reader follows (jsonl.Torn), the session logged next is a line of its
// own, and damage elsewhere is left for the readers to name.
func TestSessionLogTail(t *testing.T) {
	old, err := rollout.EncodeTrajectory(&rollout.Trajectory{TaskID: "before-the-crash", Split: SessionSplit})
	if err != nil {
		t.Fatal(err)
	}
	line := func(b []byte) string { return string(b) + "\n" }
	tests := []struct {
		name, file string
		// kept is the start of the file serve appends to; want, the
		// sessions read back before the new one; torn, the line cut off
		// with a warning; damaged, the line the readers name.
		kept          string
		want          []string
		torn, damaged int
	}{
		{name: "empty file", file: "", kept: ""},
		{name: "torn last line", file: line(old) + string(old[:len(old)/2]), kept: line(old), want: []string{"before-the-crash"}, torn: 2},
		{name: "last record without its newline", file: string(old), kept: line(old), want: []string{"before-the-crash"}},
		{name: "damaged line in the middle", file: line(old[:len(old)/2]) + line(old), kept: line(old[:len(old)/2]) + line(old), damaged: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := logtest.Capture(t, slog.LevelInfo)
			up := newRecUpstream(t, sim.Config{})
			dir, _, _ := registry(t)
			cfg := testConfig(t, up.url(), up.url(), dir)
			cfg.SessionLog.Dir = t.TempDir()
			logFile := filepath.Join(cfg.SessionLog.Dir, SessionLogFile)
			if err := os.WriteFile(logFile, []byte(tc.file), 0o600); err != nil {
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
			warning := "file=" + logFile + " line=" + strconv.Itoa(tc.torn)
			if warned := strings.Contains(logs.String(), "torn last line") && strings.Contains(logs.String(), warning); warned != (tc.torn > 0) {
				t.Errorf("warning naming %s logged: %v, want %v: %s", warning, warned, tc.torn > 0, logs.String())
			}
			data, err := os.ReadFile(logFile)
			if err != nil {
				t.Fatal(err)
			}
			rest, ok := strings.CutPrefix(string(data), tc.kept)
			if !ok {
				t.Fatalf("the log starts %q, want %q", data, tc.kept)
			}
			// The new session is one line of its own.
			added, err := rollout.DecodeTrajectory([]byte(strings.TrimSuffix(rest, "\n")))
			if err != nil || strings.Count(rest, "\n") != 1 || !strings.HasSuffix(rest, "\n") {
				t.Fatalf("appended %q (%v), want one record line", rest, err)
			}
			if id := resp.Header.Get(HeaderSession); added.TaskID != id {
				t.Errorf("appended session %s, want %s", added.TaskID, id)
			}
			trajs, rerr := rollout.ReadTrajectories(logFile)
			outs, ierr := rollout.ReadIndex(cfg.SessionLog.Dir)
			if tc.damaged > 0 {
				want := SessionLogFile + ":" + strconv.Itoa(tc.damaged) + ": "
				for reader, err := range map[string]error{"records": rerr, "index": ierr} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %v, want one naming %s", reader, err, want)
					}
				}
				return
			}
			if rerr != nil || ierr != nil {
				t.Fatalf("records: %v; index: %v", rerr, ierr)
			}
			want := append(tc.want, added.TaskID)
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
		})
	}
}
