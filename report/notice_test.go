package report

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

// Reports say the embedded model played every role only when it did; in a
// mixed run they name the roles it played, and with real models only they
// say nothing about it.
func TestModelNotice(t *testing.T) {
	tests := []struct {
		name      string
		all       bool
		roles     []string
		want      []string
		wantEmpty bool
	}{
		{name: "every role", all: true, roles: []string{"agent", "compressor", "optimizer"}, want: []string{"Every role was played by the embedded offline model"}},
		{name: "mixed", roles: []string{"compressor"}, want: []string{"Mixed models:", "played these roles: compressor;", "real models played the others"}},
		{name: "real models only", wantEmpty: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ModelNotice(tt.all, tt.roles)
			var table bytes.Buffer
			PrintTable(&table, []Row{{Name: "x", Summary: rollout.Summary{EmbeddedModel: tt.all, EmbeddedRoles: tt.roles}}})
			if tt.wantEmpty {
				if n != "" || strings.Contains(table.String(), "embedded") {
					t.Fatalf("notice %q, table:\n%s", n, table.String())
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(n, w) {
					t.Errorf("notice %q lacks %q", n, w)
				}
			}
			if !tt.all && strings.Contains(n, "Every role") {
				t.Errorf("a mixed run's notice claims every role: %q", n)
			}
			line := ModelsLine(tt.all, tt.roles)
			if !strings.Contains(table.String(), line) || (!tt.all && !strings.Contains(line, "mixed; the embedded offline model, not a real LLM, as "+strings.Join(tt.roles, ", "))) {
				t.Errorf("table line %q, table:\n%s", line, table.String())
			}
		})
	}
}

// The embedded model played every role only when it answered every use;
// a role it answered anywhere is named once, and a role nobody used is not.
func TestEmbedded(t *testing.T) {
	tests := []struct {
		name  string
		uses  []Use
		all   bool
		roles []string
	}{
		{name: "nothing used"},
		{name: "every use embedded", uses: []Use{{"embedder", true}, {"agent", true}, {"agent", true}}, all: true, roles: []string{"agent", "embedder"}},
		{name: "real agent", uses: []Use{{"agent", false}, {"embedder", true}}, roles: []string{"embedder"}},
		{name: "a role answered by both", uses: []Use{{"compressor", false}, {"compressor", true}}, roles: []string{"compressor"}},
		{name: "real models only", uses: []Use{{"agent", false}, {"compressor", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all, roles := Embedded(tt.uses)
			if all != tt.all || !slices.Equal(roles, tt.roles) {
				t.Fatalf("all %v, roles %v; want %v, %v", all, roles, tt.all, tt.roles)
			}
		})
	}
}

// A table's line covers every row: rows name only the roles their own
// strategy called, so a row without compression does not hide the roles the
// others played.
func TestTableModels(t *testing.T) {
	real := rollout.Summary{}
	agentOnly := rollout.Summary{EmbeddedModel: true, EmbeddedRoles: []string{"agent"}}
	tests := []struct {
		name string
		rows []rollout.Summary
		line string // "" none
	}{
		{name: "real agent, embedded embedder in one row", rows: []rollout.Summary{real, {EmbeddedRoles: []string{"embedder"}}},
			line: "(models: mixed; the embedded offline model, not a real LLM, as embedder; real models otherwise)"},
		{name: "embedded everywhere", rows: []rollout.Summary{agentOnly, {EmbeddedModel: true, EmbeddedRoles: []string{"agent", "compressor"}}},
			line: "(models: the embedded offline model, not a real LLM)"},
		{name: "embedded agent, real compressor", rows: []rollout.Summary{agentOnly, {EmbeddedRoles: []string{"agent"}}},
			line: "(models: mixed; the embedded offline model, not a real LLM, as agent; real models otherwise)"},
		{name: "real models only", rows: []rollout.Summary{real, real}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rows []Row
			for i, s := range tt.rows {
				rows = append(rows, Row{Name: fmt.Sprint("row", i), Summary: s})
			}
			var b bytes.Buffer
			PrintTable(&b, rows)
			if tt.line == "" && strings.Contains(b.String(), "models:") || !strings.Contains(b.String(), tt.line) {
				t.Fatalf("want %q in:\n%s", tt.line, b.String())
			}
		})
	}
}
