package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/synth"
)

// TestImportMillionCalls imports one session of 1,000,000 calls (written
// streaming, about 150 MB) through the binary: it is refused at the
// session limit, naming the line, quickly and in bounded memory, and
// nothing is written.
func TestImportMillionCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 150 MB log")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "log.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	// Appended, not formatted: fmt took most of the test's CPU under -race.
	const head, tail = `{"session_id":"one","messages":[{"role":"user","content":"call `, ` of the one long session"}],"choices":[{"message":{"role":"assistant","content":"ok"}}]}` + "\n"
	var line []byte
	for i := range 1_000_000 {
		line = append(strconv.AppendInt(append(line[:0], head...), int64(i), 10), tail...)
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd, rssOf := measuredCommand(t, binary, "import", "--in", in, "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("exit %v, want %d:\n%s", err, exitUsage, stderr.String())
	}
	if want := "log.jsonl:10001: the session that begins at line 1 has more than 10000 calls"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	rss := rssOf()
	t.Logf("refused in %v, peak RSS %d MB", wall, rss>>20)
	if rss > 512<<20 || wall > 10*time.Second {
		t.Errorf("peak RSS %d MB, wall %v; want under 512 MB and 10 s", rss>>20, wall)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused import left %s", out)
	}
}

// TestImportLossyUTF8: --lossy-utf8 imports a log with invalid UTF-8 and
// reports how many bytes it replaced.
func TestImportLossyUTF8(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "log.jsonl", chatLine("s", "hi \xff\xfe there")+chatLine("s", "fine"))
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, "import", "--in", in, "--out", out, "--lossy-utf8")
	if code != 0 || !strings.Contains(stdout, "replaced 2 invalid UTF-8 bytes with U+FFFD (--lossy-utf8)") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if hits := grepTree(t, out, "hi \uFFFD\uFFFD there"); len(hits) == 0 {
		t.Error("the replaced text is not in the import")
	}
}

// TestSynthRunReportsSkippedLines: a workflow line that fails the schema
// and a second line with an id already read are not executed, each warned
// about on the terminal with its file and line, and counted in the
// summary; the first workflow of the id is executed once.
func TestSynthRunReportsSkippedLines(t *testing.T) {
	dir := t.TempDir()
	cfg := synthJob(t, dir, "0s")
	wf := synthGenerated(t, dir, cfg, "2")
	b, err := os.ReadFile(filepath.Join(wf, synth.WorkflowsFile))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	wfs := writeFile(t, dir, "w.jsonl", string(b)+first+"\n"+`{"id":"wf-bad","domain":"office"}`+"\n")
	out := filepath.Join(dir, "run")
	code, stdout, stderr := runCLI(t, "synth", "run", "--config", cfg, "--workflows", wfs, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"level=WARN", "w.jsonl:3: workflow id", "is already line 1", "w.jsonl:4: invalid workflow"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "4 read (1 invalid, 1 duplicate ids: not executed), 2 executed") {
		t.Errorf("summary line:\n%s", stdout)
	}
	sum := readJSON[synth.RunSummary](t, filepath.Join(out, synth.RunSummaryFile))
	if sum.Invalid != 1 || sum.Duplicates != 1 || sum.Executed != 2 {
		t.Errorf("run-summary.json %+v", sum)
	}
}

// rssSpawnEnv makes the test binary a spawner (TestMain): it runs the
// command of its arguments and writes the command's peak RSS to the file
// the variable names. A command started straight from the test process
// would report the test process's peak as its own: os/exec starts it with
// vfork, and Linux counts the peak of the memory it execs away from.
const rssSpawnEnv = "CTXOPT_TEST_RSS_FILE"

// measuredCommand is the command name args run through the spawner, and a
// function that returns its peak RSS in bytes once it has run: an upper
// bound (it includes the small spawner's own peak), never the test's.
func measuredCommand(t *testing.T, name string, args ...string) (*exec.Cmd, func() int64) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rss")
	cmd := exec.Command(os.Args[0], append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), rssSpawnEnv+"="+file)
	return cmd, func() int64 {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("peak RSS of %s: %v", name, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("peak RSS of %s: %v", name, err)
		}
		return n
	}
}

// spawnForRSS runs args with this process's standard streams, writes its
// peak RSS in bytes to file and returns its exit code.
func spawnForRSS(file string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if err := os.WriteFile(file, []byte(strconv.FormatInt(rss, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	return cmd.ProcessState.ExitCode()
}
