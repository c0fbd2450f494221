package pipeline

import "testing"

// The embedded model costs nothing whatever the job's prices; a role at a
// real endpoint keeps its price.
func TestProjectionMoney(t *testing.T) {
	tests := []struct {
		name     string
		agentURL string
		free     bool
	}{
		{name: "every role embedded", agentURL: Embedded, free: true},
		{name: "a real agent", agentURL: "http://127.0.0.1:1/v1", free: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := smallJob(t, 8, "")
			job.Roles.Agent.BaseURL = tc.agentURL
			p := Project(job, 8)
			if p.Embedded != tc.free || (p.USD == 0) != tc.free || (p.Money() == NoMoney) != tc.free {
				t.Fatalf("projection %+v (%s), want free %v", p, p.Money(), tc.free)
			}
			if p.LLMCalls == 0 || p.Tokens == 0 {
				t.Fatalf("projection %+v counts no work", p)
			}
		})
	}
}
