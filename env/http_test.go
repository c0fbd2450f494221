package env_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/fakeenv"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
)

func appWorldConfig(t *testing.T, srv *fakeenv.Server, tasks []fakeenv.Task) env.HTTPConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, fakeenv.AppWorldTasksFile(tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	return env.HTTPConfig{Preset: "appworld", BaseURL: srv.URL, TasksFile: path, Timeout: 5 * time.Second, MaxRetries: 2}
}

func genericConfig(srv *fakeenv.Server) env.HTTPConfig {
	return env.HTTPConfig{
		Preset: "generic", BaseURL: srv.URL, Timeout: 5 * time.Second, MaxRetries: 2,
		Tasks:         &env.HTTPEndpoint{Method: "GET", Path: "/tasks", Items: "tasks"},
		ToolsEndpoint: &env.HTTPEndpoint{Method: "GET", Path: "/tools", Items: "tools"},
	}
}

// newHTTP opens the HTTP environment cfg describes, and closes srv when
// the test ends.
func newHTTP(t *testing.T, srv *fakeenv.Server, cfg env.HTTPConfig) *env.HTTPEnv {
	t.Helper()
	t.Cleanup(srv.Close)
	e, err := env.NewHTTP(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func act(tool, args string) env.Action {
	return env.Action{Tool: tool, Arguments: json.RawMessage(args)}
}

// TestHTTPEpisodes drives one episode per preset by hand: the right
// answer scores as a success, a wrong one as a failure, and every session
// is closed.
func TestHTTPEpisodes(t *testing.T) {
	tasks := fakeenv.Tasks(1)
	tests := []struct {
		name    string
		srv     *fakeenv.Server
		cfg     func(*fakeenv.Server) env.HTTPConfig
		lookup  func(fakeenv.Task) env.Action
		submit  func(answer string) env.Action
		evalsBy int64 // evaluate calls per episode
	}{
		{
			name: "appworld", srv: fakeenv.NewAppWorld(tasks, fakeenv.Options{}),
			cfg: func(s *fakeenv.Server) env.HTTPConfig { return appWorldConfig(t, s, tasks) },
			lookup: func(ft fakeenv.Task) env.Action {
				b, _ := json.Marshal(map[string]string{"code": "print(apis.bank.show_balance(account='" + ft.Account + "'))"})
				return act("execute", string(b))
			},
			submit: func(a string) env.Action {
				return act("execute", `{"code": "apis.supervisor.complete_task(answer='`+a+`')"}`)
			},
			evalsBy: 1,
		},
		{
			name: "generic", srv: fakeenv.NewGeneric(tasks, fakeenv.Options{}),
			cfg:     genericConfig,
			lookup:  func(ft fakeenv.Task) env.Action { return act("lookup", `{"account": "`+ft.Account+`"}`) },
			submit:  func(a string) env.Action { return act("submit", `{"value": "`+a+`"}`) },
			evalsBy: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newHTTP(t, tt.srv, tt.cfg(tt.srv))
			train, err := e.Tasks("train")
			if err != nil || len(train) != 1 || train[0].ID != tasks[0].ID {
				t.Fatalf("train tasks %+v, %v", train, err)
			}
			if len(e.Tools()) == 0 {
				t.Fatal("no tools")
			}
			for _, answer := range []string{tasks[0].Balance, "999999"} {
				ep, err := e.Reset(ctx, train[0])
				if err != nil {
					t.Fatal(err)
				}
				res, err := ep.Step(ctx, tt.lookup(tasks[0]))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(res.Observation, "The balance of "+tasks[0].Account+" is "+tasks[0].Balance+".") || res.Done {
					t.Fatalf("lookup: %+v", res)
				}
				if res, err = ep.Step(ctx, act("nosuchtool", `{}`)); err != nil || !strings.Contains(res.Observation, "unknown tool") {
					t.Fatalf("unknown tool: %+v, %v", res, err)
				}
				res, err = ep.Step(ctx, tt.submit(answer))
				if err != nil {
					t.Fatal(err)
				}
				want := answer == tasks[0].Balance
				if !res.Done || res.Score == nil || res.Score.Success != want {
					t.Fatalf("submit %s: %+v score %+v, want success %v", answer, res, res.Score, want)
				}
				if err := ep.(interface{ Close(context.Context) error }).Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tt.srv.Opens() != 2 || tt.srv.Closes() != 2 || tt.srv.Open() != 0 {
				t.Errorf("opens %d closes %d open %d, want 2 2 0", tt.srv.Opens(), tt.srv.Closes(), tt.srv.Open())
			}
			if got := tt.srv.Evaluations(); got != 2*tt.evalsBy {
				t.Errorf("%d evaluate calls, want %d", got, 2*tt.evalsBy)
			}
		})
	}
}

// TestHTTPReplyShape: a reply without the configured path is an error
// naming the path and the field that configures it.
func TestHTTPReplyShape(t *testing.T) {
	tasks := fakeenv.Tasks(1)
	for _, tt := range []struct {
		name string
		srv  *fakeenv.Server
		cfg  func(*fakeenv.Server) env.HTTPConfig
		act  env.Action
		want string
	}{
		{"generic", fakeenv.NewGeneric(tasks, fakeenv.Options{DropObservation: true}), genericConfig,
			act("lookup", `{"account": "x"}`), `no value at "observation" (env.http.step.observation)`},
		{"appworld", fakeenv.NewAppWorld(tasks, fakeenv.Options{DropObservation: true}), func(s *fakeenv.Server) env.HTTPConfig { return appWorldConfig(t, s, tasks) },
			act("execute", `{"code": "x"}`), `no value at "output" (env.http.step.observation)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newHTTP(t, tt.srv, tt.cfg(tt.srv))
			ts, _ := e.Tasks("train")
			ep, err := e.Reset(ctx, ts[0])
			if err != nil {
				t.Fatal(err)
			}
			defer ep.(interface{ Close(context.Context) error }).Close(ctx)
			_, err = ep.Step(ctx, tt.act)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %s", err, tt.want)
			}
		})
	}
}

// TestHTTPRetries: 503s are retried per the LLM rules; a server that stays
// down is an infrastructure failure (llm.ErrUnavailable).
func TestHTTPRetries(t *testing.T) {
	tasks := fakeenv.Tasks(1)
	for _, tt := range []struct {
		name  string
		opts  fakeenv.Options
		steps int64 // step calls the server saw
		down  bool
	}{
		{"recovers", fakeenv.Options{FailFirst: 2}, 3, false},
		{"stays down", fakeenv.Options{AlwaysFail: true}, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeenv.NewGeneric(tasks, tt.opts)
			ctx := context.Background()
			e := newHTTP(t, srv, genericConfig(srv))
			ts, _ := e.Tasks("train")
			ep, err := e.Reset(ctx, ts[0])
			if err != nil {
				t.Fatal(err)
			}
			_, err = ep.Step(ctx, act("lookup", `{"account": "x"}`))
			if got := errors.Is(err, llm.ErrUnavailable); got != tt.down || (!tt.down && err != nil) {
				t.Fatalf("err = %v, want unavailable %v", err, tt.down)
			}
			if srv.Steps() != tt.steps {
				t.Errorf("server saw %d step calls, want %d", srv.Steps(), tt.steps)
			}
		})
	}
}

func TestHTTPConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  env.HTTPConfig
		want string
	}{
		{"unknown preset", env.HTTPConfig{Preset: "gym", BaseURL: "http://127.0.0.1:1"}, `env.http.preset: unknown preset "gym"`},
		{"no base url", env.HTTPConfig{Preset: "appworld", TasksFile: "x"}, "env.http.base_url"},
		{"no tasks", env.HTTPConfig{Preset: "appworld", BaseURL: "http://127.0.0.1:1"}, "env.http.tasks_file"},
		{"no endpoints", env.HTTPConfig{BaseURL: "http://127.0.0.1:1", TasksFile: "x", Tools: []env.HTTPTool{{Name: "a"}}}, "env.http.reset: missing"},
		{"bad placeholder", env.HTTPConfig{Preset: "generic", BaseURL: "http://127.0.0.1:1", TasksFile: "x", Tools: []env.HTTPTool{{Name: "a"}},
			Reset: &env.HTTPEndpoint{Body: map[string]any{"id": "$action"}}}, `env.http.reset.body: placeholder "$action"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.NewHTTP(context.Background(), tt.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("bad tasks file line", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.jsonl")
		os.WriteFile(path, []byte(`{"id":"a","prompt":"p","split":"train"}`+"\n"+`{"id":"b","prompt":"p"}`+"\n"), 0o644)
		_, err := env.NewHTTP(context.Background(), env.HTTPConfig{Preset: "appworld", BaseURL: "http://127.0.0.1:1", TasksFile: path}, nil)
		if err == nil || !strings.Contains(err.Error(), "tasks.jsonl:2: task b: \"split\"") {
			t.Fatalf("err = %v, want the file, line and field", err)
		}
	})
}

// TestHTTPHeaders: headers_env sends the variable's value; an unset one
// is an error naming the field and the variable, not the value.
func TestHTTPHeaders(t *testing.T) {
	tasks := fakeenv.Tasks(1)
	srv := fakeenv.NewGeneric(tasks, fakeenv.Options{RequireToken: "Bearer s3cret-token"})
	defer srv.Close()
	cfg := genericConfig(srv)
	cfg.HeadersEnv = map[string]string{"Authorization": "CTXOPT_TEST_ENV_TOKEN"}
	if _, err := env.NewHTTP(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "env.http.headers_env.Authorization") || !strings.Contains(err.Error(), "CTXOPT_TEST_ENV_TOKEN") {
		t.Fatalf("unset variable: %v", err)
	}
	t.Setenv("CTXOPT_TEST_ENV_TOKEN", "Bearer wrong-token")
	if _, err := env.NewHTTP(context.Background(), cfg, nil); err == nil || strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("wrong token: %v, want a 401 error without the token", err)
	}
	t.Setenv("CTXOPT_TEST_ENV_TOKEN", "Bearer s3cret-token")
	if _, err := env.NewHTTP(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPErrorsRedacted: the replies and URLs an error quotes lose the
// configured header values and every secret the project's redaction
// knows, and stay short whatever the server sent.
func TestHTTPErrorsRedacted(t *testing.T) {
	token := "Bearer " + strings.Repeat("s3cR", 6)
	openai := "sk-proj-" + strings.Repeat("Q7wLm2Xp", 6)
	google := "AIza" + "SyD8" + strings.Repeat("k3Jq", 7) + "x9Z"
	password := "hunter2-" + "Blue!"
	echo := fmt.Sprintf(`{"echo": {"auth": %q, "key": %q, "db": {"password": %q}}, "pad": %q}`,
		token, openai, password, strings.Repeat("x", 100<<10))
	tests := []struct {
		name   string
		status int
		body   string
		query  string // appended to the base URL
	}{
		{name: "error status", status: http.StatusBadRequest, body: echo},
		{name: "no value at the items path", status: http.StatusOK, body: echo},
		{name: "not JSON", status: http.StatusOK, body: "oops " + echo[:200]},
		{name: "unreachable, key in the URL", query: "?key=" + google},
	}
	t.Setenv("CTXOPT_TEST_ENV_TOKEN", token)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			base := srv.URL
			if tt.status == 0 {
				srv.Close() // nothing listens: the dial error quotes the URL
			} else {
				defer srv.Close()
			}
			cfg := env.HTTPConfig{
				Preset: "generic", BaseURL: base + "/" + tt.query, Timeout: 5 * time.Second, MaxRetries: -1,
				Tasks:         &env.HTTPEndpoint{Method: "GET", Path: "/tasks", Items: "tasks"},
				ToolsEndpoint: &env.HTTPEndpoint{Method: "GET", Path: "/tools", Items: "tools"},
				HeadersEnv:    map[string]string{"Authorization": "CTXOPT_TEST_ENV_TOKEN"},
			}
			_, err := env.NewHTTP(context.Background(), cfg, redact.New(false))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, secret := range []string{strings.TrimPrefix(token, "Bearer "), openai, google, password} {
				if strings.Contains(msg, secret) {
					t.Errorf("the error quotes %q: %s", secret, msg)
				}
			}
			if len(msg) > 1000 {
				t.Errorf("the error is %d bytes long", len(msg))
			}
			if !strings.Contains(msg, "REDACTED") {
				t.Errorf("nothing was redacted: %s", msg)
			}
		})
	}
}
