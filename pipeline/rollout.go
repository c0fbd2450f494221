package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/rollout"
)

// rolloutDir is where a rollout stage keeps the rollout's own files.
const rolloutDir = "rollout"

// stagedRollout is a rollout of the run with its stage's inputs.
type stagedRollout struct {
	*rollout.Result
	inputs rolloutInputs
}

// rolloutInputs are a rollout stage's inputs. The agent's fingerprint names
// the environment's settings, the strategy with its parameters and
// guidelines, the limits and the models; the tasks are named by content.
type rolloutInputs struct {
	Agent rollout.Fingerprint `json:"agent"`
	Tasks string              `json:"tasks"`
}

// rolloutName names a rollout in the inputs of a stage that reads its
// trajectories: what it was made from (its stage's inputs, so a change of
// environment, strategy, model or task that leaves the outcomes alone
// still changes the trajectories' name) and what happened in it.
type rolloutName struct {
	Inputs  rolloutInputs `json:"inputs"`
	Outcome string        `json:"outcome"`
}

func (r *stagedRollout) name() rolloutName {
	return rolloutName{Inputs: r.inputs, Outcome: outcomeHash(r.Result)}
}

// rollout runs tasks with a strategy as a stage, or reuses it.
func (p *runner) rollout(name string, s compress.Name, g *compress.Prompt, tasks []env.Task) (*stagedRollout, error) {
	return p.rolloutCounted(name, s, g, tasks, nil)
}

// rolloutCounted is rollout counting its tasks in prog, when set, so the
// rollouts of one step report as one piece of work.
func (p *runner) rolloutCounted(name string, s compress.Name, g *compress.Prompt, tasks []env.Task, prog *progress.Progress) (*stagedRollout, error) {
	agent, err := p.newAgent(s, g)
	if err != nil {
		return nil, err
	}
	runner := p.rt.Runner(agent, name)
	runner.Progress = prog
	inputs := rolloutInputs{Agent: agent.Fingerprint(), Tasks: tasksHash(tasks)}
	res, err := stage(p.dir, p.meter, stageSpec[*rollout.Result]{
		name: name, inputs: inputs, store: p.store,
		run: func(dir string) (*rollout.Result, map[string]float64, error) {
			r, err := p.engine.Rollout(p.ctx, runner, p.rolloutWork(name, filepath.Join(dir, rolloutDir), s, g, tasks, agent))
			if rerr := p.meter.Refresh(); err == nil {
				err = rerr
			}
			if err != nil {
				return nil, nil, err
			}
			if n := r.Summary.InfraFailures; n > 0 {
				// Not done: a re-run retries these tasks and keeps the rest.
				return nil, nil, unfinished(n, len(tasks))
			}
			return r, map[string]float64{"tasks": float64(r.Summary.Tasks), "success_rate": r.Summary.SuccessRate}, nil
		},
		// The rollout's own files are its saved result: the runner reads a
		// finished rollout back after checking its fingerprint and tasks.
		load: func(dir string) (*rollout.Result, error) {
			return runner.RunDir(p.ctx, tasks, filepath.Join(dir, rolloutDir))
		},
	})
	if err != nil {
		return nil, err
	}
	if prog != nil {
		// Tasks read back rather than run count as done at once.
		switch {
		case res.Reused:
			prog.Add(len(tasks))
		case res.Summary.ResumedTasks > 0:
			prog.Add(res.Summary.ResumedTasks)
		}
	}
	return &stagedRollout{Result: res, inputs: inputs}, nil
}

// newAgent returns a metered agent compressing the optimized kind with g
// and the other kind with its fixed starting guideline.
func (p *runner) newAgent(s compress.Name, g *compress.Prompt) (*rollout.Agent, error) {
	agent, strategy, err := p.agentWith(s, g, p.agent, p.compressor, p.embedder)
	if err != nil {
		return nil, err
	}
	p.uses = append(p.uses, p.rt.agentUses(strategy, "")...)
	return agent, nil
}

// agentWith is newAgent with the given clients; it records nothing on p,
// so workers call it concurrently.
func (p *runner) agentWith(s compress.Name, g *compress.Prompt, model rollout.Completer, compressor compress.Completer, embedder compress.Embedder) (*rollout.Agent, *compress.Strategy, error) {
	hist, obs := g, p.other
	if p.kind != guideline.KindHistory {
		hist, obs = p.other, g
	}
	strategy, err := p.rt.Strategy(s, hist, obs, compressor, embedder)
	if err != nil {
		return nil, nil, err
	}
	agent := p.rt.NewAgent(strategy)
	agent.Model = model
	return agent, strategy, nil
}

// tasksHash identifies tasks by content, so an edited dataset with the same
// task ids does not reuse stale stages.
func tasksHash(ts []env.Task) string {
	b, _ := json.Marshal(ts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func taskIDs(ts []env.Task) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// outcomeHash identifies a rollout by what happened in it, not by how it
// was obtained (cache hits, retries and resumes do not change it).
func outcomeHash(r *rollout.Result) string {
	h := sha256.New()
	for _, t := range r.Outcomes {
		m := t.Metrics
		fmt.Fprintf(h, "%s %v %d %d %d %d\n", t.TaskID, t.Success, m.Steps, m.AgentInputTokens, m.CompressorOutputTokens, t.Events)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// rolloutWork describes a rollout stage for the engine.
func (p *runner) rolloutWork(name, dir string, s compress.Name, g *compress.Prompt, tasks []env.Task, agent *rollout.Agent) RolloutWork {
	w := RolloutWork{RunDir: p.dir, Store: p.shared, Stage: name, Dir: dir, Strategy: s, Tasks: tasks, Fingerprint: agent.Fingerprint(), Budget: p.job.Budget, Spent: p.meter.Snapshot()}
	if g != nil {
		if t, ok := g.Template.(*guideline.Template); ok {
			w.Guideline = t.Source()
		}
	}
	return w
}
