package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// badCase is one bad input tried through the real binary.
type badCase struct {
	name string
	// job edits the demo job written to {job}; dataset edits a copy of the
	// bundled dataset at {ds} (nil data drops the file) that the job uses.
	job     func(src string) string
	dataset func(name string, data []byte) []byte
	// files are written under the case's directory before the run.
	files map[string]string
	// args, with {job}, {out}, {dir} and {ds} replaced; default: run.
	args []string
	code int // default exitUsage
	want []string
}

// TestBadInput is the corpus of bad inputs a new or careless user tries:
// each exits with the right code, says what is wrong in words a user can act
// on, leaves nothing behind and never panics.
func TestBadInput(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "llm.db")
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ds := ""
			if tc.dataset != nil {
				ds = copyDataset(t, dir, tc.dataset)
			}
			job := writeJob(t, dir, func(s string) string {
				s = strings.Replace(s, "path: "+filepath.Join(dir, "cache", "llm.db"), "path: "+cache, 1)
				if ds != "" {
					s = strings.Replace(s, `dataset: ""`, "dataset: "+ds, 1)
				}
				if tc.job != nil {
					s = tc.job(s)
				}
				return strings.ReplaceAll(s, "{dir}", dir)
			})
			for name, data := range tc.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(strings.ReplaceAll(data, "{dir}", dir)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := tc.args
			if args == nil {
				args = []string{"run", "--config", "{job}", "--out", "{out}"}
			}
			r := strings.NewReplacer("{job}", job, "{out}", filepath.Join(dir, "out"), "{dir}", dir, "{ds}", ds)
			for i := range args {
				args[i] = r.Replace(args[i])
			}
			before := tree(t, dir)
			cmd := exec.Command(binary, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Env = append(os.Environ(), "CTXOPT_CACHE="+cache)
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			want := tc.code
			if want == 0 {
				want = exitUsage
			}
			msg := stderr.String()
			if code != want {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, want, msg)
			}
			if strings.Contains(msg, "panic:") || strings.Contains(msg, "goroutine ") {
				t.Errorf("panicked:\n%s", msg)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(msg) {
					t.Errorf("stderr does not match %q:\n%s", w, msg)
				}
			}
			if after := tree(t, dir); !slicesEqual(before, after) {
				t.Errorf("left output behind: before %v, after %v", before, after)
			}
		})
	}
}

// tree lists every path under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("demo job has no " + old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

// editFile applies edit to the named dataset file only.
func editFile(file string, edit func([]byte) []byte) func(string, []byte) []byte {
	return func(name string, b []byte) []byte {
		if name != file {
			return b
		}
		return edit(b)
	}
}

func setLine(n int, line string) func([]byte) []byte {
	return func(b []byte) []byte {
		lines := bytes.SplitAfter(b, []byte("\n"))
		lines[n-1] = []byte(line + "\n")
		return bytes.Join(lines, nil)
	}
}

const historyGuideline = "Summarize.\n{{ task }}\n{{ prev_summary }}\n{{ history }}\n"

// billionLoop iterates 10⁹ times: nine nested loops over ten digits.
var billionLoop = historyGuideline + strings.Repeat(`{% for d in "0123456789" %}`, 9) + "x" + strings.Repeat("{% endfor %}", 9)

func rolloutArgs(extra ...string) []string {
	return append([]string{"rollout", "--config", "{job}", "--out", "{out}", "--limit", "2"}, extra...)
}

// chatLine is one OpenAI chat log line of session with the user's content.
func chatLine(session, content string) string {
	return `{"session_id":"` + session + `","messages":[{"role":"user","content":"` + content + `"}],"choices":[{"message":{"role":"assistant","content":"ok"}}]}` + "\n"
}

func importArgs(extra ...string) []string {
	return append([]string{"import", "--in", "{dir}/log.jsonl", "--out", "{out}"}, extra...)
}

func synthRunArgs() []string {
	return []string{"synth", "run", "--config", "{job}", "--workflows", "{dir}/w.jsonl", "--out", "{out}"}
}

// longPlan is a workflows line whose plan has n steps.
func longPlan(n int) string {
	var b strings.Builder
	b.WriteString(`{"id":"w","domain":"office","input":"x","plan":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"s%d"`, i)
	}
	b.WriteString(`],"instructions":[{"step":"s0","text":"x"}],"output":{"spec":"x"},"checker":{"expected":"x"}}` + "\n")
	return b.String()
}

func badCases() []badCase {
	remoteAgent := replace("  agent:\n    base_url: embedded", "  agent:\n    base_url: http://127.0.0.1:9/v1")
	return []badCase{
		// Job files.
		{name: "job unknown key", job: replace("  top_k: 3", "  top_k: 3\n  topk: 5"), want: []string{`job\.yaml: line \d+: field topk not found`, `jobs/demo\.yaml`}},
		{name: "job wrong type", job: replace("  concurrency: 8\n\noptimize", "  concurrency: many\n\noptimize"), want: []string{`line \d+`, `many`}},
		{name: "job empty", files: map[string]string{"empty.yaml": ""}, args: []string{"run", "--config", "{dir}/empty.yaml", "--out", "{out}"}, want: []string{`empty\.yaml: the job file is empty`}},
		{name: "job only comments", files: map[string]string{"c.yaml": "# todo\n"}, args: []string{"run", "--config", "{dir}/c.yaml", "--out", "{out}"}, want: []string{`c\.yaml: .*only comments`}},
		{name: "job is a list", files: map[string]string{"l.yaml": "- a\n- b\n"}, args: []string{"run", "--config", "{dir}/l.yaml", "--out", "{out}"}, want: []string{`l\.yaml: line 1`}},
		{name: "job yaml syntax", files: map[string]string{"s.yaml": "name: [x\n"}, args: []string{"run", "--config", "{dir}/s.yaml", "--out", "{out}"}, want: []string{`s\.yaml: line \d+`}},
		{name: "job duplicate key", job: replace("name: demo\n", "name: demo\nname: again\n"), want: []string{`"name" already defined`}},
		{name: "job missing", args: []string{"run", "--config", "{dir}/nope.yaml", "--out", "{out}"}, want: []string{`nope\.yaml`, `no such file`}},
		{name: "job is a directory", args: []string{"run", "--config", "{dir}", "--out", "{out}"}, want: []string{`is a directory`}},
		{name: "rounds 0", job: replace("  rounds: 1", "  rounds: 0"), want: []string{`line \d+: field optimize\.rounds: 0 is out of range; want 1 to 20`}},
		{name: "candidates 0", job: replace("  candidates: 5", "  candidates: 0"), want: []string{`field optimize\.candidates: 0 .*want 1 to 50`}},
		{name: "concurrency 0", job: replace("rollout:\n  concurrency: 8", "rollout:\n  concurrency: 0"), want: []string{`field rollout\.concurrency: 0 .*want 1 to 1024`}},
		{name: "concurrency 0 in rollout", job: replace("rollout:\n  concurrency: 8", "rollout:\n  concurrency: 0"), args: rolloutArgs(), want: []string{`field rollout\.concurrency`}},
		{name: "top_k 0", job: replace("  top_k: 3", "  top_k: 0"), want: []string{`field env\.top_k: 0`}},
		{name: "step_limit negative", job: replace("  step_limit: 30", "  step_limit: -1"), want: []string{`field env\.step_limit: -1 .*want 1 to 1000`}},
		{name: "history threshold 0", job: replace("    threshold: 2048", "    threshold: 0"), want: []string{`field compression\.history\.threshold: 0`}},
		{name: "feedback_sample 0", job: replace("  feedback_sample: 4", "  feedback_sample: 0"), want: []string{`field optimize\.feedback_sample`}},
		{name: "co_holdout over 1", job: replace("  co_holdout: 0.5", "  co_holdout: 1.5"), want: []string{`field optimize\.co_holdout: 1\.5 .*between 0 and 1`}},
		{name: "validation_fraction 1", job: replace("  validation_fraction: 0.1", "  validation_fraction: 1"), want: []string{`field distill\.validation_fraction: 1 is out of range; want a share of tasks in \[0, 1\)`}},
		{name: "step_ratio below 1", job: replace("  step_ratio: 1.5", "  step_ratio: 0.5"), want: []string{`field optimize\.step_ratio: 0\.5`}},
		{name: "gate rule unknown metric", job: replace("  disabled: false     # compare the selected guideline on the test split", "  disabled: false\n  gate: [\"succes >= 0\"]"), want: []string{`line \d+: field eval\.gate\[0\]: rule "succes >= 0": unknown metric "succes"`}},
		{name: "lambda negative", job: replace("  lambda: 0.5", "  lambda: -1"), want: []string{`field optimize\.lambda: -1 is negative`}},
		{name: "budget negative", job: replace("  usd: 0", "  usd: -5"), want: []string{`field budget\.usd: -5 is negative`}},
		{name: "several problems one line each", job: func(s string) string {
			return replace("  candidates: 5", "  candidates: 0")(replace("  rounds: 1", "  rounds: 0")(s))
		}, want: []string{`job\.yaml: line \d+: field optimize\.rounds`, `\n.*job\.yaml: line \d+: field optimize\.candidates`}},
		{name: "role missing", job: replace("  optimizer:\n    base_url: embedded\n    model: ctxopt-sim\n", "  optimizer:\n"), want: []string{`field roles\.optimizer\.base_url: missing`}},
		{name: "role left out", job: func(s string) string {
			i, j := strings.Index(s, "  optimizer:\n"), strings.Index(s, "  judge:\n")
			return s[:i] + s[j:]
		}, want: []string{`field roles\.optimizer: missing`}},
		{name: "key variable unset", job: func(s string) string {
			return replace("    base_url: http://127.0.0.1:9/v1", "    base_url: http://127.0.0.1:9/v1\n    key_env: CTXOPT_TEST_UNSET_KEY")(remoteAgent(s))
		}, want: []string{`field roles\.agent\.key_env: variable CTXOPT_TEST_UNSET_KEY is not set`, `no_key: true`}},
		{name: "key variable unset in rollout", job: func(s string) string {
			return replace("    base_url: http://127.0.0.1:9/v1", "    base_url: http://127.0.0.1:9/v1\n    key_env: CTXOPT_TEST_UNSET_KEY")(remoteAgent(s))
		}, args: rolloutArgs(), want: []string{`field roles\.agent\.key_env`}},
		{name: "endpoint without key_env", job: remoteAgent, want: []string{`field roles\.agent\.key_env: missing`}},
		{name: "base_url not http", job: replace("  agent:\n    base_url: embedded", "  agent:\n    base_url: ftp://x\n    no_key: true"), want: []string{`field roles\.agent\.base_url: is not an http\(s\) URL`}},
		{name: "base_url with credentials", job: replace("  agent:\n    base_url: embedded", "  agent:\n    base_url: http://u:secretpw@127.0.0.1:9/v1\n    no_key: true"), want: []string{`must not carry credentials`}},
		{name: "temperature out of range", job: replace("    temperature: 0\n    max_tokens: 1024", "    temperature: 3\n    max_tokens: 1024"), want: []string{`field roles\.agent\.temperature: 3 is outside \[0, 2\]`}},
		{name: "price negative", job: replace("    price_in: 2.00      #", "    price_in: -2      #"), want: []string{`field roles\.agent\.price_in: must not be negative`}},
		{name: "unknown environment", job: replace("  name: qa ", "  name: appworld "), want: []string{`field env\.name: unknown environment "appworld"; want qa`}},
		{name: "cache path is a directory", job: func(s string) string {
			return regexp.MustCompile(`(?m)^  path: .*$`).ReplaceAllString(s, "  path: /tmp")
		}, want: []string{`field cache\.path: /tmp is a directory`}},
		{name: "embedded fault rate", job: func(s string) string { return s + "embedded:\n  rate_429: 2\n" }, want: []string{`field embedded`}},
		{name: "starting guideline missing", job: replace("    threshold: 2048", "    threshold: 2048\n    guideline: nope.tmpl"), want: []string{`compression\.history\.guideline`, `nope\.tmpl`}},
		{name: "starting guideline empty", files: map[string]string{"g.tmpl": ""}, job: replace("    threshold: 2048", "    threshold: 2048\n    guideline: {dir}/g.tmpl"), want: []string{`is empty`}},
		{name: "nothing to compress", job: replace("  history:\n    enabled: true", "  history:\n    enabled: false"), want: []string{`nothing to optimize`}},

		// Datasets.
		{name: "dataset file missing", dataset: func(name string, b []byte) []byte {
			return map[bool][]byte{true: nil, false: b}[name == "train.jsonl"]
		}, want: []string{`train\.jsonl`, `no such file`, `env\.dataset`}},
		{name: "dataset dir missing", job: replace(`dataset: ""`, "dataset: /nonexistent/qa"), want: []string{`/nonexistent/qa`}},
		{name: "dataset malformed line", dataset: editFile("train.jsonl", setLine(5, `{"id": "qa-train-0005", "questions": [`)), want: []string{`train\.jsonl:5: malformed JSON`}},
		{name: "dataset unknown field", dataset: editFile("train.jsonl", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"questions"`), []byte(`"questionz"`), 1)
		}), want: []string{`train\.jsonl:1: unknown field "questionz"`}},
		{name: "dataset wrong question count", dataset: editFile("train.jsonl", setLine(2, `{"id":"x","questions":[{"q":"a?","answers":["b"]}]}`)), want: []string{`train\.jsonl:2: field "questions": want 8 questions, got 1`}},
		{name: "dataset duplicate task id", dataset: editFile("train.jsonl", func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			return append(b, lines[0]...)
		}), want: []string{`field "id": task "qa-train-0001" already defined`}},
		{name: "dataset empty split", dataset: editFile("test.jsonl", func([]byte) []byte { return []byte{} }), args: rolloutArgs("--split", "test"), want: []string{`test\.jsonl.* empty`}},
		{name: "corpus empty", dataset: editFile("corpus.jsonl", func([]byte) []byte { return []byte("\n") }), want: []string{`corpus\.jsonl.* empty`}},
		{name: "corpus passage without text", dataset: editFile("corpus.jsonl", setLine(3, `{"id":"p-x","title":"T","text":""}`)), want: []string{`corpus\.jsonl:3: field "text": missing or empty`}},
		{name: "corpus not JSON", dataset: editFile("corpus.jsonl", setLine(1, `id,title,text`)), want: []string{`corpus\.jsonl:1: malformed JSON`}},
		{name: "corpus 10 MB line", dataset: editFile("corpus.jsonl", setLine(2, `{"id":"p-big","title":"T","text":"`+strings.Repeat("word ", 2<<20)+`"}`)),
			want: []string{`corpus\.jsonl:2: line longer than the limit of 1 MiB; raise env\.max_line_bytes`}},
		{name: "dataset 20 MB line", dataset: editFile("train.jsonl", setLine(3, `{"id":"big","questions":"`+strings.Repeat("x", 20<<20)+`"}`)), args: rolloutArgs(),
			want: []string{`train\.jsonl:3: line longer than the limit of 1 MiB`}},
		{name: "dataset file over the limit", job: replace("  step_limit: 30", "  step_limit: 30\n  max_file_bytes: 1000"), want: []string{`corpus\.jsonl:\d+: file longer than the limit of 1000 bytes; raise env\.max_file_bytes`}},
		{name: "dataset limit negative", job: replace("  step_limit: 30", "  step_limit: 30\n  max_line_bytes: -1"), want: []string{`field env\.max_line_bytes: -1 is negative`}},
		{name: "dataset wrong type", dataset: editFile("train.jsonl", setLine(1, `{"id": 5, "questions": []}`)), want: []string{`train\.jsonl:1: field "id": want string`}},
		{name: "dataset blank answer", dataset: editFile("train.jsonl", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"answers":["`), []byte(`"answers":["", "`), 1)
		}), args: rolloutArgs(), want: []string{`train\.jsonl:1: field "questions\[0\]\.answers\[0\]": empty`}},

		// Guideline templates.
		{name: "guideline file empty", files: map[string]string{"g.tmpl": " \n"}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`g\.tmpl is empty`}},
		{name: "guideline without variables", files: map[string]string{"g.tmpl": "Summarize the history.\n"}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`uses neither prev_summary nor observation`, `--kind`}},
		{name: "guideline missing variable", files: map[string]string{"g.tmpl": "{{ task }} {{ prev_summary }}"}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`rejected 1 of 1`}},
		{name: "guideline include", files: map[string]string{"g.tmpl": historyGuideline + `{% include "/etc/passwd" %}`}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`rejected 1 of 1`}},
		{name: "guideline syntax error", files: map[string]string{"g.tmpl": historyGuideline + "{% if task %}"}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`rejected 1 of 1`}},
		{name: "guideline 10^9 loop", files: map[string]string{"g.tmpl": billionLoop}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`rejected 1 of 1`}},
		{name: "rollout with a 10^9 loop", files: map[string]string{"g.tmpl": billionLoop}, args: rolloutArgs("--strategy", "guideline", "--guideline", "{dir}/g.tmpl"),
			want: []string{`loop at line 5 iterates over "\\"0123456789\\""`, `inside another loop`}},
		{name: "run with a 10^9 loop", files: map[string]string{"g.tmpl": billionLoop}, job: replace("    threshold: 2048", "    threshold: 2048\n    guideline: {dir}/g.tmpl"),
			want: []string{`loop at line 5 iterates over`}},
		{name: "guideline unknown kind", files: map[string]string{"g.tmpl": historyGuideline}, args: []string{"guideline", "validate", "--kind", "summary", "{dir}/g.tmpl"}, want: []string{`--kind: unknown guideline kind "summary": want history or observation`}},
		{name: "guideline file missing", args: []string{"guideline", "validate", "{dir}/none.tmpl"}, want: []string{`none\.tmpl`, `no such file`}},
		{name: "guideline is a directory", args: []string{"guideline", "validate", "{dir}"}, want: []string{`is a directory`}},
		{name: "guideline too large", files: map[string]string{"g.tmpl": historyGuideline + strings.Repeat("x", 40<<10)}, args: []string{"guideline", "validate", "{dir}/g.tmpl"}, want: []string{`larger than the limit of 32768 bytes`}},
		{name: "guideline validate without files", args: []string{"guideline", "validate"}, want: []string{`want one or more FILE`}},
		{name: "rollout with invalid guideline", files: map[string]string{"g.tmpl": "{{ task }} {{ prev_summary }}"}, args: rolloutArgs("--strategy", "guideline", "--guideline", "{dir}/g.tmpl"), want: []string{`missing required variable "history"`}},

		// Distillation inputs.
		{name: "distill without out", args: []string{"distill", "--run", "{dir}"}, want: []string{`--out is required`}},
		{name: "distill out is a file", files: map[string]string{"f": "x"}, args: []string{"distill", "--run", "{dir}", "--out", "{dir}/f"}, want: []string{`is a file, not a directory`}},
		{name: "distill run missing", args: []string{"distill", "--run", "{dir}/none", "--out", "{out}"}, want: []string{`none`, `no such file`}},
		{name: "distill validation fraction", args: []string{"distill", "--run", "{dir}", "--out", "{out}", "--validation-fraction", "1.5"}, want: []string{`--validation-fraction 1\.5 is out of range; want a share of tasks in \[0, 1\)`}},
		{name: "distill max length", args: []string{"distill", "--run", "{dir}", "--out", "{out}", "--max-length", "0"}, want: []string{`--max-length 0`}},
		{name: "distill malformed trajectory", files: map[string]string{"t.jsonl": "{\"task_id\": \"a\", \"turns\": []}\nnot json\n"}, args: []string{"distill", "--trajectories", "{dir}/t.jsonl", "--out", "{out}"}, want: []string{`t\.jsonl:2:`}},
		{name: "distill no successes", files: map[string]string{"t.jsonl": "{\"task_id\": \"a\", \"success\": false, \"turns\": []}\n"}, args: []string{"distill", "--trajectories", "{dir}/t.jsonl", "--out", "{out}"}, want: []string{`no successful compressed trajectories`}},
		{name: "distill argument", args: []string{"distill", "{dir}/x.jsonl"}, want: []string{`did you mean: optimize distill validate`}},
		{name: "distill validate missing file", args: []string{"distill", "validate", "{dir}/x.jsonl"}, want: []string{`x\.jsonl`}},
		{name: "distill validate without files", args: []string{"distill", "validate"}, want: []string{`give one or more`}},

		// Serve configuration.
		{name: "serve config empty", files: map[string]string{"s.yaml": ""}, args: []string{"serve", "--config", "{dir}/s.yaml", "--listen", "127.0.0.1:0"}, want: []string{`serve config .*s\.yaml is empty`}},
		{name: "serve threshold 0", files: map[string]string{"s.yaml": "upstream:\n  openai:\n    base_url: http://127.0.0.1:9/v1\ncompression:\n  registry: {dir}\n  threshold: 0\nauth:\n  anonymous: true\n"},
			args: []string{"serve", "--config", "{dir}/s.yaml", "--listen", "127.0.0.1:0"}, want: []string{`line 6: field compression\.threshold: must be a positive`}},
		{name: "serve key variable unset", files: map[string]string{"s.yaml": "upstream:\n  openai:\n    base_url: http://127.0.0.1:9/v1\n    key_env: CTXOPT_TEST_UNSET_KEY\ncompression:\n  registry: {dir}\nauth:\n  anonymous: true\n"},
			args: []string{"serve", "--config", "{dir}/s.yaml", "--listen", "127.0.0.1:0"}, want: []string{`line 4: field upstream\.openai\.key_env: variable CTXOPT_TEST_UNSET_KEY is not set`}},

		// Sizes and text (issue 28): every input dimension bounded, invalid
		// text refused with its line and byte offset.
		{name: "job invalid UTF-8", job: replace("name: demo\n", "name: demo\xff\n"), want: []string{`job\.yaml:5: invalid UTF-8 .*at byte offset 10 of the line`}},
		{name: "max_tokens 1e15", job: replace("    max_tokens: 1024", "    max_tokens: 1e15"), want: []string{`line \d+: field roles\.agent\.max_tokens: 1000000000000000 is out of range; want 0 .* to 2097152`}},
		{name: "max_tokens over the context", job: replace("rollout:\n  concurrency: 8", "rollout:\n  concurrency: 8\n  context_window: 1000"),
			want: []string{`field roles\.agent\.max_tokens: 1024 is not below rollout\.context_window \(1000\).*raise rollout\.context_window`}},
		{name: "dataset invalid UTF-8", dataset: editFile("train.jsonl", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"questions"`), []byte("\"q\xff\xfeuestions\""), 1)
		}), args: rolloutArgs(), want: []string{`train\.jsonl:1: invalid UTF-8 .*at byte offset \d+ of the line \(\d+ of the file\)`}},
		{name: "distill invalid UTF-8", files: map[string]string{"t.jsonl": "{\"task_id\": \"a\xff\", \"turns\": []}\n"}, args: []string{"distill", "--trajectories", "{dir}/t.jsonl", "--out", "{out}"},
			want: []string{`t\.jsonl:1: invalid UTF-8 .*at byte offset 14 of the line`}},
		{name: "distill content not a string", files: map[string]string{"t.jsonl": `{"task_id":"a","success":true,"events":[{"kind":"history","input":[{"role":"user","content":{"a":1}}],"output":"x"}]}` + "\n"},
			args: []string{"distill", "--trajectories", "{dir}/t.jsonl", "--out", "{out}"}, want: []string{`t\.jsonl:1:`, `content`}},
		{name: "distill run is a file", files: map[string]string{"t.jsonl": "{}\n"}, args: []string{"distill", "--run", "{dir}/t.jsonl", "--out", "{out}"},
			want: []string{`--run .*t\.jsonl is a file, not a run directory; .*--trajectories`}},
		{name: "import invalid UTF-8", files: map[string]string{"log.jsonl": chatLine("s", "hi\xff")}, args: importArgs(),
			want: []string{`log\.jsonl:1: invalid UTF-8 .*at byte offset 58 of the line`, `--lossy-utf8`}},
		{name: "import content an object", files: map[string]string{"log.jsonl": strings.Replace(chatLine("s", "x"), `"content":"x"`, `"content":{"text":"x"}`, 1)}, args: importArgs(),
			want: []string{`log\.jsonl:1: message 0: content is an object; want a string or a list of content parts`}},
		{name: "import content nested 100000 deep", files: map[string]string{"log.jsonl": strings.Replace(chatLine("s", "x"), `"content":"x"`, `"content":`+strings.Repeat(`{"a":`, 100000)+"1"+strings.Repeat("}", 100000), 1)},
			args: importArgs(), want: []string{`log\.jsonl:1: nested deeper than the limit of 64 levels \(raise --max-depth`}},
		{name: "import messages over the limit", files: map[string]string{"log.jsonl": strings.Replace(chatLine("s", "x"), `"messages":[`, `"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},`, 1)},
			args: importArgs("--max-messages", "2"), want: []string{`log\.jsonl:1: more than 2 messages .*raise --max-messages`}},
		{name: "import session over the limit", files: map[string]string{"log.jsonl": chatLine("s", "a") + chatLine("s", "b") + chatLine("s", "c")},
			args: importArgs("--max-session-calls", "2"), want: []string{`log\.jsonl:3: the session that begins at line 1 has more than 2 calls.*raise --max-session-calls.*refused, not split`}},
		{name: "import limit negative", files: map[string]string{"log.jsonl": chatLine("s", "a")}, args: importArgs("--max-depth", "-1"), want: []string{`--max-depth: want a positive limit`}},
		{name: "synth plan over the limit", files: map[string]string{"w.jsonl": longPlan(100000)}, args: synthRunArgs(),
			want: []string{`w\.jsonl:1: field plan: 100000 steps, more than the limit of 256; raise synth\.max_plan_steps in the job file`}},
		{name: "synth workflows over the limit", files: map[string]string{"w.jsonl": "{}\n{}\n{}\n"}, job: replace("  max_workflows: 1000000 ", "  max_workflows: 2 "), args: synthRunArgs(),
			want: []string{`w\.jsonl:3: more than 2 workflows, the limit; raise synth\.max_workflows in the job file`}},
		{name: "synth workflows invalid UTF-8", files: map[string]string{"w.jsonl": "{\"id\": \"w\xff\"}\n"}, args: synthRunArgs(), want: []string{`w\.jsonl:1: invalid UTF-8 .*at byte offset 9 of the line`}},
		{name: "synth limit negative", job: replace("  max_plan_steps: 256 ", "  max_plan_steps: -1 "), want: []string{`line \d+: field synth\.max_plan_steps: -1 is negative`}},
		{name: "serve config invalid UTF-8", files: map[string]string{"s.yaml": "upstream:\n  openai:\n    base_url: http://127.0.0.1:9/v1\xff\n"},
			args: []string{"serve", "--config", "{dir}/s.yaml", "--listen", "127.0.0.1:0"}, want: []string{`s\.yaml:3: invalid UTF-8 .*byte offset 35 of the line`}},
		{name: "serve metrics auth unknown", files: map[string]string{"s.yaml": "upstream:\n  openai:\n    base_url: http://127.0.0.1:9/v1\ncompression:\n  registry: {dir}\nauth:\n  anonymous: true\nmetrics:\n  auth: open\n"},
			args: []string{"serve", "--config", "{dir}/s.yaml", "--listen", "127.0.0.1:0"}, want: []string{`line 9: field metrics\.auth: "open" is unknown; want none .* or key`}},

		// CLI misuse.
		{name: "unknown command", args: []string{"optimise"}, want: []string{`optimise`}},
		{name: "unknown flag", args: []string{"run", "--confg", "{job}"}, want: []string{`confg`}},
		{name: "missing required flag", args: []string{"run", "--out", "{out}"}, want: []string{`config`}},
		{name: "log level", args: []string{"--log-level", "loud", "run", "--config", "{job}", "--out", "{out}"}, want: []string{`--log-level "loud": want debug, info, warn or error`}},
		{name: "log format", args: []string{"--log-format", "xml", "run", "--config", "{job}", "--out", "{out}"}, want: []string{`--log-format "xml": want text or json`}},
		{name: "split", args: rolloutArgs("--split", "dev"), want: []string{`--split: want train or test, got "dev"`}},
		{name: "strategy", args: rolloutArgs("--strategy", "magic"), want: []string{`unknown strategy "magic": want one of none, fifo, .*plan-aware`}},
		{name: "limit negative", args: rolloutArgs("--limit", "-5"), want: []string{`--limit -5: want a positive number`}},
		{name: "limit zero", args: rolloutArgs("--limit", "0"), want: []string{`--limit 0: want a positive number`}},
		{name: "limit not a number", args: rolloutArgs("--limit", "many"), want: []string{`many`}},
		{name: "rollout out is a file", files: map[string]string{"f": "x"}, args: []string{"rollout", "--config", "{job}", "--out", "{dir}/f"}, want: []string{`--out .*f is a file, not a directory`}},
		{name: "rollout out under a file", files: map[string]string{"f": "x"}, args: []string{"rollout", "--config", "{job}", "--out", "{dir}/f/out"}, want: []string{`is a file, not a directory`}},
		{name: "run out is a file", files: map[string]string{"f": "x"}, args: []string{"run", "--config", "{job}", "--out", "{dir}/f"}, want: []string{`--out .*f is a file, not a directory`}},
		{name: "guideline flag with another strategy", files: map[string]string{"g.tmpl": historyGuideline}, args: rolloutArgs("--strategy", "fifo", "--guideline", "{dir}/g.tmpl"), want: []string{`--guideline goes with --strategy guideline or plan-aware, not fifo`}},
		{name: "observation guideline with prompting", files: map[string]string{"g.tmpl": historyGuideline}, args: rolloutArgs("--strategy", "prompting", "--observation-guideline", "{dir}/g.tmpl"), want: []string{`--guideline goes with --strategy guideline or plan-aware`}},
		{name: "guideline strategy without file", args: rolloutArgs("--strategy", "guideline"), want: []string{`needs --guideline FILE`}},
		{name: "sim fault rate", args: []string{"sim", "--rate-429", "2"}, want: []string{`rates in \[0,1\]`}},
		{name: "sim argument", args: []string{"sim", "now"}, want: []string{`optimize sim takes only flags`}},
		{name: "registry missing", args: []string{"guideline", "list"}, want: []string{`missing --registry DIR`}},
		{name: "registry not a directory", args: []string{"guideline", "list", "--registry", "{dir}/none"}, want: []string{`not a directory`}},
		{name: "show without id", files: map[string]string{"reg/.keep": ""}, args: []string{"guideline", "show", "--registry", "{dir}/reg"}, want: []string{`want ID, got 0 arguments`}},
		{name: "promote unknown id", files: map[string]string{"reg/.keep": ""}, args: []string{"guideline", "promote", "h-000000000000", "--registry", "{dir}/reg"}, want: []string{`h-000000000000`}},
		{name: "promote selected without run", files: map[string]string{"reg/.keep": ""}, args: []string{"guideline", "promote", "selected", "--registry", "{dir}/reg"}, want: []string{`"selected" names the guideline a run selected: give --run DIR`}},
		{name: "promote selected before a round", files: map[string]string{"run/guidelines/.keep": "", "run/summary.json": `{"selected_guideline": ""}`}, args: []string{"guideline", "promote", "selected", "--run", "{dir}/run"}, want: []string{`has selected no guideline yet`}},
	}
}
