package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Without a terminal (as under go test), a piece of work logs one Info
// line when it ends, and nothing when there was nothing to do.
func TestLogLines(t *testing.T) {
	tests := []struct {
		name  string
		total int
		add   []int
		want  []string // Info lines' messages
	}{
		{name: "done", total: 4, add: []int{1, 3}, want: []string{"msg=finished work=w done=4 total=4"}},
		{name: "cut short", total: 4, add: []int{1}, want: []string{"msg=stopped work=w done=1 total=4"}},
		{name: "nothing to do", total: 0, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			old := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
			defer slog.SetDefault(old)
			p := New("w", tc.total)
			p.every = 0 // a count line at every Add, at Debug
			for _, n := range tc.add {
				p.Add(n)
			}
			p.Finish()
			p.Finish() // once only
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d Info lines, want %d:\n%s", len(lines), len(tc.want), buf.String())
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %q does not contain %q", lines[i], w)
				}
			}
		})
	}
}
