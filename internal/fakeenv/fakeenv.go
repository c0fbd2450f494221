// Package fakeenv serves small fake environment servers on loopback for
// tests of the external HTTP environment: one shaped like AppWorld's
// environment server, one generic reset/step/close server. Both count the
// sessions they open and close. Their tasks spell out a plan the embedded
// model's plan agent follows (docs/embedded-model.md).
package fakeenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Task is one fake task: the agent must look up the balance of Account
// and submit it.
type Task struct {
	ID, Split, Account, Balance string
}

// Tasks returns n train and n test tasks.
func Tasks(n int) []Task {
	names := []string{"Ada", "Brin", "Cato", "Dara", "Eno", "Fay", "Gus", "Hale", "Ivo", "Juno"}
	var ts []Task
	for _, split := range []string{"train", "test"} {
		for i := range n {
			k := len(ts)
			ts = append(ts, Task{
				ID: fmt.Sprintf("%s-%03d", split, i+1), Split: split,
				Account: names[k%len(names)] + fmt.Sprintf(" K%d", k), Balance: fmt.Sprintf("%d", 100+37*k),
			})
		}
	}
	return ts
}

// Options shape a fake server's behaviour.
type Options struct {
	// StepLatency delays every step reply.
	StepLatency time.Duration
	// FailFirst answers the first FailFirst step calls with 503.
	FailFirst int
	// AlwaysFail answers every step call with 503.
	AlwaysFail bool
	// DropObservation leaves the observation out of step replies.
	DropObservation bool
	// RequireToken answers 401 to requests whose Authorization differs.
	RequireToken string
}

// Server is a running fake environment server.
type Server struct {
	*httptest.Server
	tasks map[string]Task
	order []Task
	opts  Options

	opens, closes, steps, evaluations atomic.Int64
	mu                                sync.Mutex
	open                              map[string]*session
	nextID                            int
}

type session struct {
	task     Task
	answer   string
	complete bool
}

// Opens, Closes, Steps and Evaluations count calls so far; Open is the
// number of sessions opened and not closed.
func (s *Server) Opens() int64       { return s.opens.Load() }
func (s *Server) Closes() int64      { return s.closes.Load() }
func (s *Server) Steps() int64       { return s.steps.Load() }
func (s *Server) Evaluations() int64 { return s.evaluations.Load() }
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

func newServer(tasks []Task, opts Options, mux func(s *Server) *http.ServeMux) *Server {
	s := &Server{tasks: map[string]Task{}, order: tasks, opts: opts, open: map[string]*session{}}
	for _, t := range tasks {
		s.tasks[t.ID] = t
	}
	var h http.Handler = mux(s)
	if tok := opts.RequireToken; tok != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != tok {
				http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	s.Server = httptest.NewUnstartedServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakeenv: listen on loopback: %v", err))
	}
	s.Listener = l
	s.Start()
	return s
}

func (s *Server) failStep(w http.ResponseWriter) bool {
	n := s.steps.Add(1)
	if s.opts.AlwaysFail || n <= int64(s.opts.FailFirst) {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return true
	}
	if d := s.opts.StepLatency; d > 0 {
		time.Sleep(d)
	}
	return false
}

func (s *Server) lookup(account string, t Task) string {
	if account != t.Account {
		return fmt.Sprintf("No account named %s. %s", account, filler())
	}
	return fmt.Sprintf("%s The balance of %s is %s. %s", filler(), t.Account, t.Balance, filler())
}

// filler pads replies as real apps do.
func filler() string {
	return strings.Repeat("Statement lines follow in the usual order, with the posting dates and references. ", 3)
}

// closeHandler ends the session named by the body's key field.
func (s *Server) closeHandler(key string, answer any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		decode(r, &req)
		id, _ := req[key].(string)
		s.mu.Lock()
		delete(s.open, id)
		s.mu.Unlock()
		s.closes.Add(1)
		reply(w, answer)
	}
}

func decode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// knownTask decodes a request that opens an episode of {"task_id"}; an
// unknown task is answered 400 and false.
func (s *Server) knownTask(w http.ResponseWriter, r *http.Request) (Task, bool) {
	var req struct {
		TaskID string `json:"task_id"`
	}
	if decode(r, &req) != nil || s.tasks[req.TaskID].ID == "" {
		http.Error(w, "unknown task", http.StatusBadRequest)
		return Task{}, false
	}
	return s.tasks[req.TaskID], true
}

// stepSession decodes a step request into req, injects the step faults
// and returns the session that id (read from req) names with s.mu held:
// the caller unlocks it. A bad body, a fault or an unknown session is
// answered and false.
func (s *Server) stepSession(w http.ResponseWriter, r *http.Request, req any, id func() string) (*session, bool) {
	if decode(r, req) != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return nil, false
	}
	if s.failStep(w) {
		return nil, false
	}
	s.mu.Lock()
	ss := s.open[id()]
	if ss == nil {
		s.mu.Unlock()
		http.Error(w, "no such session", http.StatusBadRequest)
		return nil, false
	}
	return ss, true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

var (
	balanceCallRE  = regexp.MustCompile(`show_balance\(account='([^']*)'\)`)
	completeCallRE = regexp.MustCompile(`complete_task\(answer='([^']*)'\)`)
)

// NewAppWorld serves AppWorld's environment-server shape: POST /initialize,
// /execute, /task_completed, /evaluate and /close, every reply wrapped as
// {"output": ...}, sessions keyed by task id, actions Python code strings
// (the fake understands apis.bank.show_balance(account='X') and
// apis.supervisor.complete_task(answer='Y')).
func NewAppWorld(tasks []Task, opts Options) *Server {
	return newServer(tasks, opts, func(s *Server) *http.ServeMux {
		m := http.NewServeMux()
		m.HandleFunc("POST /initialize", func(w http.ResponseWriter, r *http.Request) {
			t, ok := s.knownTask(w, r)
			if !ok {
				return
			}
			s.mu.Lock()
			s.open[t.ID] = &session{task: t}
			s.mu.Unlock()
			s.opens.Add(1)
			reply(w, map[string]any{"output": nil})
		})
		m.HandleFunc("POST /execute", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				TaskID string `json:"task_id"`
				Code   string `json:"code"`
			}
			ss, ok := s.stepSession(w, r, &req, func() string { return req.TaskID })
			if !ok {
				return
			}
			var out string
			switch {
			case balanceCallRE.MatchString(req.Code):
				out = s.lookup(balanceCallRE.FindStringSubmatch(req.Code)[1], ss.task)
			case completeCallRE.MatchString(req.Code):
				ss.answer, ss.complete = completeCallRE.FindStringSubmatch(req.Code)[1], true
				out = "Marked the active task complete."
			default:
				out = "Execution failed. NameError: the code uses no known API."
			}
			s.mu.Unlock()
			if s.opts.DropObservation {
				reply(w, map[string]any{"result": out})
				return
			}
			reply(w, map[string]any{"output": out})
		})
		m.HandleFunc("POST /task_completed", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				TaskID string `json:"task_id"`
			}
			decode(r, &req)
			s.mu.Lock()
			ss := s.open[req.TaskID]
			done := ss != nil && ss.complete
			s.mu.Unlock()
			reply(w, map[string]any{"output": done})
		})
		m.HandleFunc("POST /evaluate", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				TaskID string `json:"task_id"`
			}
			decode(r, &req)
			s.evaluations.Add(1)
			s.mu.Lock()
			ss := s.open[req.TaskID]
			ok := ss != nil && ss.complete && ss.answer == ss.task.Balance
			s.mu.Unlock()
			pass := 0
			if ok {
				pass = 1
			}
			reply(w, map[string]any{"output": map[string]any{"success": ok, "pass_count": pass, "num_tests": 1}})
		})
		m.HandleFunc("POST /close", s.closeHandler("task_id", map[string]any{"output": nil}))
		return m
	})
}

// AppWorldTasksFile is the tasks file (JSONL) for the AppWorld-shaped fake.
func AppWorldTasksFile(tasks []Task) []byte {
	var b strings.Builder
	for _, t := range tasks {
		line, _ := json.Marshal(map[string]string{"id": t.ID, "split": t.Split, "prompt": fmt.Sprintf(
			"Find the balance of the bank account of %s and submit it as the answer.\n\nPlan:\n"+
				"1. execute {\"code\": \"print(apis.bank.show_balance(account='%s'))\"}\n"+
				"2. execute {\"code\": \"apis.supervisor.complete_task(answer='{{balance of %s}}')\"}\n",
			t.Account, t.Account, t.Account)})
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// NewGeneric serves a reset/step/close shape: GET /tasks and /tools, POST
// /reset {task_id} -> {session_id, observation}, POST /step {session_id,
// action: {tool, arguments}} -> {observation, done, reward}, POST /close.
func NewGeneric(tasks []Task, opts Options) *Server {
	return newServer(tasks, opts, func(s *Server) *http.ServeMux {
		m := http.NewServeMux()
		m.HandleFunc("GET /tasks", func(w http.ResponseWriter, r *http.Request) {
			var list []map[string]string
			for _, t := range s.order {
				list = append(list, map[string]string{"id": t.ID, "split": t.Split, "prompt": fmt.Sprintf(
					"Look up the balance of %s and submit it.\n\nPlan:\n1. lookup {\"account\": \"%s\"}\n2. submit {\"value\": \"{{balance of %s}}\"}\n",
					t.Account, t.Account, t.Account)})
			}
			reply(w, map[string]any{"tasks": list})
		})
		m.HandleFunc("GET /tools", func(w http.ResponseWriter, r *http.Request) {
			str := map[string]any{"type": "string"}
			reply(w, map[string]any{"tools": []map[string]any{
				{"name": "lookup", "description": "Show an account's statement.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"account": str}, "required": []string{"account"}}},
				{"name": "submit", "description": "Submit the answer and end the episode.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"value": str}, "required": []string{"value"}}},
			}})
		})
		m.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
			t, ok := s.knownTask(w, r)
			if !ok {
				return
			}
			s.mu.Lock()
			s.nextID++
			id := fmt.Sprintf("s%d", s.nextID)
			s.open[id] = &session{task: t}
			s.mu.Unlock()
			s.opens.Add(1)
			reply(w, map[string]any{"session_id": id, "observation": "Bank app ready."})
		})
		m.HandleFunc("POST /step", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				SessionID string `json:"session_id"`
				Action    struct {
					Tool      string            `json:"tool"`
					Arguments map[string]string `json:"arguments"`
				} `json:"action"`
			}
			ss, ok := s.stepSession(w, r, &req, func() string { return req.SessionID })
			if !ok {
				return
			}
			res := map[string]any{"done": false, "reward": 0}
			switch req.Action.Tool {
			case "lookup":
				res["observation"] = s.lookup(req.Action.Arguments["account"], ss.task)
			case "submit":
				res["done"] = true
				res["observation"] = "Submitted."
				if req.Action.Arguments["value"] == ss.task.Balance {
					res["reward"] = 1
				}
			default:
				res["observation"] = "unknown tool"
			}
			s.mu.Unlock()
			if s.opts.DropObservation {
				delete(res, "observation")
			}
			reply(w, res)
		})
		m.HandleFunc("POST /close", s.closeHandler("session_id", map[string]any{"ok": true}))
		return m
	})
}
