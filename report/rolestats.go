package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ctxopt/ctxopt/llm"
)

// PrintRoleStats writes each role's calls, in the roles' order.
func PrintRoleStats(w io.Writer, roles map[string]llm.Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "role\tcalls\tcache hits\tretries\tfailures\tmalformed\tprompt tok\tcompletion tok\t")
	for _, name := range llm.Roles() {
		if s, ok := roles[name]; ok {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, s.Calls, s.CacheHits, s.Retries, s.Failures, s.Malformed, s.PromptTokens, s.CompletionTokens)
		}
	}
	tw.Flush()
}
