package guideline

import (
	"fmt"
	"strings"
)

// unifiedDiff returns a unified diff (3 lines of context) of two texts, or
// "" when they are equal. Guidelines are at most MaxSourceBytes, so the
// quadratic LCS table stays small.
func unifiedDiff(nameA, nameB, a, b string) string {
	if a == b {
		return ""
	}
	la, lb := splitLines(a), splitLines(b)
	ops := lineOps(la, lb)

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	const context = 3
	for i := 0; i < len(ops); {
		// Find the next change.
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(i-context, 0)
		// Extend the hunk while changes are within 2*context of each other.
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		hunk := ops[start:end]
		aStart, bStart := ops[start].a, ops[start].b
		var aN, bN int
		for _, op := range hunk {
			if op.kind != '+' {
				aN++
			}
			if op.kind != '-' {
				bN++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
		for _, op := range hunk {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			if op.noEOL {
				out.WriteString("\n\\ No newline at end of file")
			}
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

// hunkRange formats a hunk's start,count; start is 0-based here.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

type line struct {
	text  string
	noEOL bool // the last line of a text without a final newline
}

func splitLines(s string) []line {
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	out := make([]line, len(parts))
	for i, p := range parts {
		out[i] = line{text: strings.TrimSuffix(p, "\n"), noEOL: !strings.HasSuffix(p, "\n")}
	}
	return out
}

type lineOp struct {
	kind  byte // ' ', '-', '+'
	text  string
	noEOL bool
	a, b  int // 0-based line positions in a and b where this op starts
}

// lineOps is a shortest edit script from an LCS table, deletions first.
func lineOps(a, b []line) []lineOp {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []lineOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, lineOp{' ', a[i].text, a[i].noEOL, i, j})
			i++
			j++
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, lineOp{'-', a[i].text, a[i].noEOL, i, j})
			i++
		default:
			ops = append(ops, lineOp{'+', b[j].text, b[j].noEOL, i, j})
			j++
		}
	}
	return ops
}
