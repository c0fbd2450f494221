// Command serve-bench measures optimize serve on loopback (make bench,
// through bench/serve.sh), against the embedded model as upstream, each in
// its own process:
//
//  1. added latency: the same small chat request (nothing to compress) at a
//     fixed rate straight to the upstream, through serve and through nginx,
//     in turns of 1 s; p50 and p99 of each and the difference (goal: p99
//     added <= 1.5 ms at 1,000 req/s);
//  2. throughput: closed-loop clients straight to the upstream, through
//     serve and through nginx proxy_pass, in paired rounds (every path once
//     per round, the order rotating), so each ratio compares runs seconds
//     apart; the median of the per-round ratios serve/nginx (goal >= 0.8),
//     and the CPU time per request of each proxy and of the upstream, which
//     the machine's other load disturbs less than req/s;
//  3. memory: many keep-alive connections held open, each sending a request
//     every 2 s, while serve's RSS, Go heap and stacks are sampled each
//     second; a verdict from the samples after the warm-up (goal: flat);
//  4. compaction: long tool-using conversations with the summarizer slowed
//     (see compaction.go): the share of summaries a request waited for, the
//     waits, the upstream tokens per compacted turn, the summarizer calls
//     and the tool pairs sent.
//
// With --baseline (another build of optimize, such as today's main), its
// serve runs beside this one: in the latency and throughput phases as one
// more path, in the same rounds, and in the compaction phase on the same
// conversations, so every comparison is paired in one run.
//
// Like for like: nginx runs as many workers as serve has GOMAXPROCS (both
// the machine's CPUs unless --procs says otherwise), both keep connections
// to the upstream alive and neither closes a keep-alive connection after a
// number of requests (nginx's default of 1,000 is lifted, as Go has none);
// every path gets the same client code, concurrency and request.
//
// Every figure is printed; nothing is asserted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/templates"
)

var body = []byte(`{"model":"ctxopt-sim","messages":[{"role":"system","content":"You answer questions by searching."},{"role":"user","content":"Q1: What is the river of Ostrel?"}],"tools":[{"type":"function","function":{"name":"search","description":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`)

type options struct {
	optimize, nginx string
	baseline        string
	compaction      compactionOptions
	procs           int
	phases          map[string]bool
	rate            int
	latencyFor      time.Duration
	clients, rounds int
	throughputFor   time.Duration
	conns           int
	holdFor, warmup time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.optimize, "optimize", "bin/optimize", "the optimize binary")
	flag.StringVar(&o.nginx, "nginx", "", "the nginx binary (empty: skip the comparison)")
	flag.StringVar(&o.baseline, "baseline", "", "another optimize binary whose serve is measured beside this one (empty: none)")
	summarizer := flag.String("summarizer", "300ms,1.5s,5s", "summarizer latencies of the compaction runs, comma-separated")
	flag.IntVar(&o.compaction.conversations, "conversations", 20, "conversations of the compaction runs, all at once")
	flag.IntVar(&o.compaction.turns, "turns", 60, "tool-using turns of each conversation")
	flag.IntVar(&o.compaction.threshold, "threshold", 8000, "serve's compression threshold in the compaction runs")
	flag.DurationVar(&o.compaction.turnLatency, "turn-latency", 100*time.Millisecond, "the upstream's answer time in the compaction runs (the pace of a turn)")
	flag.StringVar(&o.compaction.maxWait, "max-wait", "", "compression.max_wait of this build in the compaction runs (empty: its default)")
	flag.IntVar(&o.compaction.keepTokens, "keep-tokens", 0, "compression.keep_tokens of this build in the compaction runs (0: its default; -1: every turn verbatim)")
	flag.StringVar(&o.compaction.linkLatency, "link-latency", "", "the teacher link's latency (its prior) of this build in the compaction runs (empty: its default)")
	flag.IntVar(&o.compaction.linkConcurrency, "link-concurrency", 0, "the teacher link's concurrency of this build in the compaction runs (0: its default)")
	flag.DurationVar(&o.compaction.held, "held", 50*time.Millisecond, "hold beyond which a request counts as having waited for a summary")
	flag.IntVar(&o.procs, "procs", runtime.NumCPU(), "serve's GOMAXPROCS and nginx's worker_processes")
	phases := flag.String("phases", "latency,throughput,memory,compaction", "which measurements to run, comma-separated")
	flag.IntVar(&o.rate, "rate", 1000, "requests per second of the latency runs")
	flag.DurationVar(&o.latencyFor, "latency-for", 10*time.Second, "length of each path's latency run")
	flag.IntVar(&o.clients, "clients", 64, "closed-loop clients of the throughput runs")
	flag.IntVar(&o.rounds, "rounds", 5, "paired rounds of the throughput runs")
	flag.DurationVar(&o.throughputFor, "throughput-for", 10*time.Second, "each path's total time in the throughput rounds")
	flag.IntVar(&o.conns, "conns", 2000, "connections held in the memory run")
	flag.DurationVar(&o.holdFor, "hold-for", 60*time.Second, "length of the memory run")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "part of the memory run before the samples judged")
	flag.Parse()
	o.phases = map[string]bool{}
	for p := range strings.SplitSeq(*phases, ",") {
		if p = strings.TrimSpace(p); !slices.Contains([]string{"latency", "throughput", "memory", "compaction"}, p) {
			fmt.Fprintf(os.Stderr, "serve-bench: --phases: unknown phase %q; want latency, throughput, memory or compaction\n", p)
			os.Exit(2)
		}
		o.phases[p] = true
	}
	for d := range strings.SplitSeq(*summarizer, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			fmt.Fprintf(os.Stderr, "serve-bench: --summarizer: %v\n", err)
			os.Exit(2)
		}
		o.compaction.summarizer = append(o.compaction.summarizer, v)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "serve-bench:", err)
		os.Exit(1)
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a child process killed at the end.
type proc struct {
	cmd  *exec.Cmd
	name string
}

func spawn(name string, env []string, args ...string) (*proc, error) {
	return spawnTo(os.Stderr, name, env, args...)
}

// spawnTo is spawn with the process's stderr written to stderr.
func spawnTo(stderr io.Writer, name string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &proc{cmd: cmd, name: name}, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func waitHTTP(url string) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not come up", url)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func run(o options) error {
	work, err := os.MkdirTemp("", "serve-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	simAddr, err := freeAddr()
	if err != nil {
		return err
	}
	sim, err := spawn("sim", nil, o.optimize, "--log-level", "warn", "sim", "--listen", simAddr)
	if err != nil {
		return err
	}
	defer sim.stop()
	direct := "http://" + simAddr
	if err := waitHTTP(direct + "/healthz"); err != nil {
		return err
	}

	reg, err := guideline.OpenRegistry(filepath.Join(work, "registry"))
	if err != nil {
		return err
	}
	src, err := templates.Source("history_prompting.tmpl")
	if err != nil {
		return err
	}
	// A bound on the summary, as guidelines optimized for cost (ACON's CO
	// step) carry: the embedded model otherwise writes a sentence a turn,
	// and in the compaction runs the summary alone would near the threshold.
	src += "\nKeep the reasoning to one brief paragraph.\n"
	rec, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: "bench"}, src)
	if err != nil {
		return err
	}
	if _, err := reg.Promote(rec.ID); err != nil {
		return err
	}
	serveAddr, err := freeAddr()
	if err != nil {
		return err
	}
	cfg := filepath.Join(work, "serve.yaml")
	yaml := fmt.Sprintf("listen: %s\nupstream:\n  openai:\n    base_url: %s/v1\ncompression:\n  registry: %s\ncompressor:\n  teacher:\n    base_url: %s/v1\n    model: ctxopt-sim\nauth:\n  anonymous: true\n",
		serveAddr, direct, reg.Dir(), direct)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return err
	}
	srv, err := spawn("serve", []string{"GOMAXPROCS=" + strconv.Itoa(o.procs)}, o.optimize, "--log-level", "warn", "serve", "--config", cfg)
	if err != nil {
		return err
	}
	defer srv.stop()
	proxied := "http://" + serveAddr
	if err := waitHTTP(proxied + "/readyz"); err != nil {
		return err
	}
	var base *proc
	var baseURL string
	if o.baseline != "" {
		if base, baseURL, err = spawnBaseline(o, work, yaml, serveAddr); err != nil {
			return err
		}
		defer base.stop()
	}
	var ngx string
	var ngxPids []int
	if o.nginx != "" {
		if ngx, ngxPids, err = startNginx(o.nginx, work, simAddr, o.procs); err != nil {
			return err
		}
		defer func() {
			_ = exec.Command(o.nginx, "-p", work, "-c", filepath.Join(work, "nginx.conf"), "-s", "quit").Run()
		}()
	}

	fmt.Printf("serve-bench: upstream is the embedded model (%s); all on 127.0.0.1, %d CPUs shared by every process; serve GOMAXPROCS %d, nginx worker_processes %d; load average %s\n",
		direct, runtime.NumCPU(), o.procs, o.procs, loadavg())

	if o.phases["latency"] {
		if err := latencyPhase(o, direct, proxied, baseURL, ngx); err != nil {
			return err
		}
	}
	if o.phases["throughput"] {
		paths := []path{
			{name: "direct", url: direct, pids: []int{sim.cmd.Process.Pid}},
			{name: "serve", url: proxied, pids: []int{srv.cmd.Process.Pid}},
		}
		if base != nil {
			paths = append(paths, path{name: "baseline", url: baseURL, pids: []int{base.cmd.Process.Pid}})
		}
		if ngx != "" {
			paths = append(paths, path{name: "nginx", url: ngx, pids: ngxPids})
		} else {
			fmt.Println("throughput: nginx not given; no comparison")
		}
		throughputPhase(o, paths, sim.cmd.Process.Pid)
	}
	if o.phases["memory"] {
		if err := hold(proxied, srv.cmd.Process.Pid, o.conns, o.holdFor, o.warmup); err != nil {
			return err
		}
	}
	if o.phases["compaction"] {
		if err := compactionPhase(o, reg.Dir()); err != nil {
			return err
		}
	}
	fmt.Printf("serve-bench: load average at the end %s\n", loadavg())
	return nil
}

// spawnBaseline starts the baseline build's serve with the config of
// this one, on another port.
func spawnBaseline(o options, work, yaml, serveAddr string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	cfg := filepath.Join(work, "serve-baseline.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(yaml, serveAddr, addr, 1)), 0o644); err != nil {
		return nil, "", err
	}
	p, err := spawn("baseline", []string{"GOMAXPROCS=" + strconv.Itoa(o.procs)}, o.baseline, "--log-level", "warn", "serve", "--config", cfg)
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	if err := waitHTTP(url + "/readyz"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, url, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// startNginx starts nginx as a proxy_pass to upstream with procs workers,
// keep-alive to the upstream, and no limit on the requests of a keep-alive
// connection; it returns its URL and the workers' pids.
func startNginx(bin, work, upstream string, procs int) (string, []int, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	conf := fmt.Sprintf(`worker_processes %[4]d;
daemon on;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000000;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream sim { server %[2]s; keepalive 256; keepalive_requests 1000000000; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`, work, upstream, addr, procs)
	path := filepath.Join(work, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	if out, err := exec.Command(bin, "-p", work, "-c", path).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("start nginx: %v: %s", err, out)
	}
	url := "http://" + addr
	if err := waitHTTP(url + "/healthz"); err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile(filepath.Join(work, "nginx.pid"))
	if err != nil {
		return "", nil, err
	}
	master, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", nil, fmt.Errorf("nginx.pid: %w", err)
	}
	workers := children(master)
	if len(workers) == 0 {
		return "", nil, errors.New("nginx has no worker processes")
	}
	return url, workers, nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(child); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// statFields are the fields of /proc/pid/stat after the command name
// (state first, so field k of proc(5) is index k-3).
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// cpuTime is the user and system time the processes used so far.
func cpuTime(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		f := statFields(pid)
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

func client(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
	}}
}

func call(c *http.Client, url string) error {
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

type percentiles struct{ p50, p99 time.Duration }

func pct(lat []time.Duration) percentiles {
	slices.Sort(lat)
	return percentiles{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}
}

func latencyPhase(o options, direct, proxied, baseline, ngx string) error {
	names := []string{"direct", "serve"}
	urls := []string{direct, proxied}
	for _, p := range []struct{ name, url string }{{"baseline serve", baseline}, {"nginx proxy_pass", ngx}} {
		if p.url != "" {
			names, urls = append(names, p.name), append(urls, p.url)
		}
	}
	if _, err := latency(urls, o.rate, time.Second); err != nil { // warm-up
		return err
	}
	p, err := latency(urls, o.rate, max(o.latencyFor, time.Second))
	if err != nil {
		return err
	}
	d, s := p[0].all, p[1].all
	fmt.Printf("latency at %d req/s, each path in turn in 1 s rounds, %s each: direct p50 %s p99 %s; through serve p50 %s p99 %s\n",
		o.rate, o.latencyFor, ms(d.p50), ms(d.p99), ms(s.p50), ms(s.p99))
	fmt.Printf("added latency of serve: p50 %s, p99 %s (goal p99 <= 1.500 ms); median over the rounds of each round's added p99 %s\n",
		ms(s.p50-d.p50), ms(s.p99-d.p99), ms(medianAdded(p[1], p[0])))
	for k := 2; k < len(urls); k++ {
		n := p[k].all
		fmt.Printf("added latency of %s, same run: p50 %s p99 %s (itself p50 %s p99 %s); median of the rounds' added p99 %s\n",
			names[k], ms(n.p50-d.p50), ms(n.p99-d.p99), ms(n.p50), ms(n.p99), ms(medianAdded(p[k], p[0])))
	}
	return nil
}

// medianAdded is the median over the rounds of the p99 of a in a round
// less the p99 of base in the same round: a stall of the machine in one
// round moves one term, not the figure.
func medianAdded(a, base pathLatency) time.Duration {
	var diffs []float64
	for r := range a.rounds {
		diffs = append(diffs, float64(a.rounds[r].p99-base.rounds[r].p99))
	}
	return time.Duration(median(diffs))
}

// pathLatency is one path's latency percentiles over all its requests
// and in each round.
type pathLatency struct {
	all    percentiles
	rounds []percentiles
}

// latency sends requests at rate (open loop: on schedule whatever the
// answers do) to each of urls in turn, in rounds of a second, for d each,
// so each sees the machine at about the same times; it returns the latency
// percentiles of each.
func latency(urls []string, rate int, d time.Duration) ([]pathLatency, error) {
	clients := make([]*http.Client, len(urls))
	lat := make([][]time.Duration, len(urls))
	out := make([]pathLatency, len(urls))
	for k := range urls {
		clients[k] = client(rate)
	}
	interval := time.Second / time.Duration(rate)
	for range int(d / time.Second) {
		for k, url := range urls {
			round := make([]time.Duration, rate)
			var failed atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for i := range rate {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					t0 := time.Now()
					if err := call(clients[k], url); err != nil {
						failed.Add(1)
					}
					round[i] = time.Since(t0)
				}()
			}
			wg.Wait()
			if f := failed.Load(); f > 0 {
				return nil, fmt.Errorf("%s: %d of %d requests failed", url, f, rate)
			}
			lat[k] = append(lat[k], round...)
			out[k].rounds = append(out[k].rounds, pct(round))
		}
	}
	for k := range urls {
		out[k].all = pct(lat[k])
	}
	return out, nil
}

// path is one way to the upstream: its URL and the processes that serve
// it (the proxy's, or the upstream's for the direct path).
type path struct {
	name string
	url  string
	pids []int
}

// sample is one path's run in one round.
type sample struct {
	rps float64
	// proxyCPU and upstreamCPU are CPU time per request of the path's
	// processes and of the upstream.
	proxyCPU, upstreamCPU time.Duration
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func us(d float64) string { return fmt.Sprintf("%.1f µs", d/float64(time.Microsecond)) }

// throughputPhase runs the paths in paired rounds and prints each round
// and the medians.
func throughputPhase(o options, paths []path, upstreamPid int) {
	rounds := max(1, o.rounds)
	per := max(o.throughputFor/time.Duration(rounds), 500*time.Millisecond)
	clients := make([]*http.Client, len(paths))
	for k, p := range paths {
		clients[k] = client(o.clients)
		throughput(clients[k], p.url, o.clients, time.Second) // warm-up: connections open
	}
	got := make([][]sample, len(paths))
	// vs is the path serve is compared with: nginx, else the baseline.
	vs := slices.IndexFunc(paths, func(p path) bool { return p.name == "nginx" })
	baseline := slices.IndexFunc(paths, func(p path) bool { return p.name == "baseline" })
	var ratios, baseRatios []float64
	for r := range rounds {
		// Rotate the order, and reverse it every other round, so no path
		// always runs first or after the same one.
		order := make([]int, len(paths))
		for i := range order {
			order[i] = (i + r) % len(paths)
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		line := fmt.Sprintf("throughput round %d:", r+1)
		for _, k := range order {
			p := paths[k]
			c0, u0 := cpuTime(p.pids), cpuTime([]int{upstreamPid})
			rps, n := throughput(clients[k], p.url, o.clients, per)
			c1, u1 := cpuTime(p.pids), cpuTime([]int{upstreamPid})
			s := sample{rps: rps}
			if n > 0 {
				s.proxyCPU, s.upstreamCPU = (c1-c0)/time.Duration(n), (u1-u0)/time.Duration(n)
			}
			got[k] = append(got[k], s)
			line += fmt.Sprintf(" %s %.0f req/s;", p.name, rps)
		}
		if vs > 0 {
			ratio := got[1][r].rps / got[vs][r].rps
			ratios = append(ratios, ratio)
			line += fmt.Sprintf(" serve/nginx %.2f;", ratio)
		}
		if baseline > 0 {
			ratio := got[1][r].rps / got[baseline][r].rps
			baseRatios = append(baseRatios, ratio)
			line += fmt.Sprintf(" serve/baseline %.2f", ratio)
		}
		fmt.Println(strings.TrimSuffix(line, ";"))
	}
	line := fmt.Sprintf("throughput with %d clients, %d rounds of %s per path (medians):", o.clients, rounds, per)
	cpu := "cpu per request (medians):"
	for k, p := range paths {
		var rps, pc, uc []float64
		for _, s := range got[k] {
			rps, pc, uc = append(rps, s.rps), append(pc, float64(s.proxyCPU)), append(uc, float64(s.upstreamCPU))
		}
		line += fmt.Sprintf(" %s %.0f req/s;", p.name, median(rps))
		if k == 0 {
			cpu += fmt.Sprintf(" upstream alone %s;", us(median(pc)))
		} else {
			cpu += fmt.Sprintf(" %s %s + upstream behind it %s;", p.name, us(median(pc)), us(median(uc)))
		}
	}
	fmt.Println(strings.TrimSuffix(line, ";"))
	fmt.Println(strings.TrimSuffix(cpu, ";"))
	if len(ratios) > 0 {
		fmt.Printf("throughput: serve/nginx median of %d paired rounds %.2f (min %.2f, max %.2f) (goal >= 0.80)\n",
			len(ratios), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	if len(baseRatios) > 0 {
		fmt.Printf("throughput: serve/baseline median of %d paired rounds %.2f (min %.2f, max %.2f) (goal >= 0.90)\n",
			len(baseRatios), median(baseRatios), slices.Min(baseRatios), slices.Max(baseRatios))
	}
}

// throughput runs clients closed-loop clients on c for d and returns req/s
// and the requests done.
func throughput(c *http.Client, url string, clients int, d time.Duration) (float64, int64) {
	var done atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if call(c, url) == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	n := done.Load()
	return float64(n) / time.Since(start).Seconds(), n
}

// goStats reads the Go runtime gauges of serve's /metrics.
func goStats(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && slices.Contains(goGauges, name) {
			out[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

var goGauges = []string{"go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes",
	"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_next_gc_bytes"}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// memSample is one second of the memory run.
type memSample struct {
	at  time.Duration
	rss float64
	// gauges of serve's Go runtime (goGauges)
	gauges map[string]float64
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	n := float64(len(x))
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// flatWithin is the verdict's bound: memory is flat when the median of
// the last third of the samples after the warm-up is within this fraction
// of the median of the first third (growing above it, falling below). Medians, not a fitted line, so that a
// burst of requests in flight (a stall of the upstream on a busy machine)
// is not read as growth, while growth that lasts is; RSS moves in pages
// and the Go heap in GC cycles, so a few per cent is noise.
const flatWithin = 0.03

// hold keeps conns raw keep-alive connections open to url for d, each
// sending the request every 2 s (staggered), samples pid's RSS and Go
// runtime each second and prints a verdict from the samples after warmup.
func hold(url string, pid, conns int, d, warmup time.Duration) error {
	host := strings.TrimPrefix(url, "http://")
	req := fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", host, len(body), body)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var ok, failed, open atomic.Int64
	var wg sync.WaitGroup
	const every = 2 * time.Second
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", host)
			if err != nil {
				failed.Add(1)
				return
			}
			open.Add(1)
			defer conn.Close()
			go func() { <-ctx.Done(); conn.Close() }()
			br := bufio.NewReader(conn)
			time.Sleep(every * time.Duration(i) / time.Duration(conns))
			for ctx.Err() == nil {
				if _, err := conn.Write(req); err != nil {
					break
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(every):
				}
			}
		}()
	}
	var samples []memSample
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			// The last second is left out: connections close then.
			if time.Until(start.Add(d)) < time.Second {
				continue
			}
			if r, err := rss(pid); err == nil {
				samples = append(samples, memSample{at: time.Since(start), rss: float64(r), gauges: goStats(url)})
			}
		}
	}
	wg.Wait()
	var after []memSample
	var peak float64
	for _, s := range samples {
		if s.at >= warmup {
			after = append(after, s)
		}
		peak = max(peak, s.rss)
	}
	if len(after) < 5 {
		return fmt.Errorf("memory run too short for its warm-up: %d samples after %s", len(after), warmup)
	}
	first, last := after[0], after[len(after)-1]
	window := (last.at - first.at).Minutes()
	mb := func(b float64) float64 { return b / (1 << 20) }
	fmt.Printf("memory: %d connections held %s (%d opened), %d requests ok, %d failed; %d samples after the %s warm-up\n",
		conns, d, open.Load(), ok.Load(), failed.Load(), len(after), warmup)
	x := make([]float64, len(after))
	for i, s := range after {
		x[i] = s.at.Seconds() / 60
	}
	series := func(get func(memSample) float64) float64 {
		y := make([]float64, len(after))
		for i, s := range after {
			y[i] = get(s)
		}
		return slope(x, y)
	}
	line := "memory: serve RSS MB/goroutines every 5 s after the warm-up:"
	for i := 0; i < len(after); i += 5 {
		line += fmt.Sprintf(" %.1f/%.0f", mb(after[i].rss), after[i].gauges["go_goroutines"])
	}
	fmt.Println(line)
	rssSlope := series(func(s memSample) float64 { return s.rss })
	fmt.Printf("memory: serve RSS %.1f MB after the warm-up, %.1f MB at the end, peak %.1f MB; fitted slope %+.2f MB/min\n",
		mb(first.rss), mb(last.rss), mb(peak), mb(rssSlope))
	heapSlope := series(func(s memSample) float64 { return s.gauges["go_memstats_heap_inuse_bytes"] })
	stackSlope := series(func(s memSample) float64 { return s.gauges["go_memstats_stack_inuse_bytes"] })
	fmt.Printf("memory: serve's Go heap in use %.1f MB then %.1f MB (slope %+.2f MB/min), stacks %.1f MB then %.1f MB (slope %+.2f MB/min), goroutines %.0f then %.0f\n",
		mb(first.gauges["go_memstats_heap_inuse_bytes"]), mb(last.gauges["go_memstats_heap_inuse_bytes"]), mb(heapSlope),
		mb(first.gauges["go_memstats_stack_inuse_bytes"]), mb(last.gauges["go_memstats_stack_inuse_bytes"]), mb(stackSlope),
		first.gauges["go_goroutines"], last.gauges["go_goroutines"])
	g0, g1 := first.gauges, last.gauges
	fmt.Printf("memory: heap idle not returned %.1f MB then %.1f MB, next GC at %.1f MB then %.1f MB, threads %.0f then %.0f\n",
		mb(g0["go_memstats_heap_idle_bytes"]-g0["go_memstats_heap_released_bytes"]), mb(g1["go_memstats_heap_idle_bytes"]-g1["go_memstats_heap_released_bytes"]),
		mb(g0["go_memstats_next_gc_bytes"]), mb(g1["go_memstats_next_gc_bytes"]), g0["go_threads"], g1["go_threads"])
	verdict := func(get func(memSample) float64) string {
		third := len(after) / 3
		var early, late []float64
		for _, s := range after[:third] {
			early = append(early, get(s))
		}
		for _, s := range after[len(after)-third:] {
			late = append(late, get(s))
		}
		from, to := median(early), median(late)
		change := (to - from) / from
		word, rel := "flat", "within"
		switch {
		case change >= flatWithin:
			word, rel = "GROWING", "beyond"
		case change <= -flatWithin:
			word, rel = "falling (no growth)", "beyond"
		}
		return fmt.Sprintf("%s (median of the last third %.1f MB vs the first %.1f MB: %+.1f%%, %s ±%.0f%%)", word, mb(to), mb(from), 100*change, rel, 100*flatWithin)
	}
	fmt.Printf("memory verdict over %.1f min after the warm-up: RSS %s; Go heap %s\n", window,
		verdict(func(s memSample) float64 { return s.rss }), verdict(func(s memSample) float64 { return s.gauges["go_memstats_heap_inuse_bytes"] }))
	return nil
}
