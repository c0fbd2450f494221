package report

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/eval"
)

// cdp drives Chromium over --remote-debugging-pipe: JSON messages ended
// by NUL on fds 3 (to the browser) and 4 (from it). No dependency needed.
type cdp struct {
	w      *os.File
	mu     sync.Mutex
	nextID int
	wait   map[int]chan json.RawMessage
	events chan map[string]json.RawMessage
}

func (c *cdp) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			close(c.events)
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSuffix(msg, []byte{0}), &m) != nil {
			continue
		}
		if raw, ok := m["id"]; ok {
			var id int
			_ = json.Unmarshal(raw, &id)
			c.mu.Lock()
			ch := c.wait[id]
			c.mu.Unlock()
			if ch != nil {
				if e, bad := m["error"]; bad {
					ch <- append([]byte(`{"error":`), append(e, '}')...)
				} else {
					ch <- m["result"]
				}
			}
			continue
		}
		c.events <- m
	}
}

func (c *cdp) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan json.RawMessage, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(b, 0)); err != nil {
		return nil, err
	}
	select {
	case res := <-ch:
		if bytes.HasPrefix(res, []byte(`{"error":`)) {
			return nil, fmt.Errorf("%s: %s", method, res)
		}
		return res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CTXOPT_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium not found; scripts/install-test-tools.sh installs it (make test runs it)")
	}
	t.Skip("chromium not found; run scripts/install-test-tools.sh")
	return ""
}

// The first screen the acceptance check looks at.
const screenW, screenH = 1200, 800

// browser is a headless Chromium driven over CDP, one tab.
type browser struct {
	c       *cdp
	session string
	stderr  *bytes.Buffer
}

func startBrowser(ctx context.Context, t *testing.T) *browser {
	bin := chromium(t)
	toBrowser, ourEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser, theirEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
		"--user-data-dir="+t.TempDir(), "--no-first-run", "--disable-extensions", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", screenW, screenH), "about:blank")
	cmd.ExtraFiles = []*os.File{toBrowser, theirEnd}
	// Chromium leaves an org.chromium.Chromium.* directory in TMPDIR on
	// every start, which its profile directory does not move.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toBrowser.Close()
	theirEnd.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	b := &browser{c: &cdp{w: ourEnd, wait: map[int]chan json.RawMessage{}, events: make(chan map[string]json.RawMessage, 1024)}, stderr: &stderr}
	go b.c.read(fromBrowser)
	raw, err := b.c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var target struct{ TargetID string }
	_ = json.Unmarshal(raw, &target)
	raw, err = b.c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		t.Fatal(err)
	}
	var att struct{ SessionID string }
	_ = json.Unmarshal(raw, &att)
	b.session = att.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"} {
		b.call(ctx, t, m, map[string]any{})
	}
	b.call(ctx, t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": screenW, "height": screenH, "deviceScaleFactor": 1, "mobile": false})
	return b
}

func (b *browser) call(ctx context.Context, t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	raw, err := b.c.call(ctx, b.session, method, params)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.stderr.String())
	}
	return raw
}

// eval runs a script returning a JSON string and decodes it into v.
func (b *browser) eval(ctx context.Context, t *testing.T, script string, v any) {
	t.Helper()
	raw := b.call(ctx, t, "Runtime.evaluate", map[string]any{"returnByValue": true, "expression": script})
	var ev struct{ Result struct{ Value string } }
	_ = json.Unmarshal(raw, &ev)
	if err := json.Unmarshal([]byte(ev.Result.Value), v); err != nil {
		t.Fatalf("evaluate: %v: %s", err, raw)
	}
}

// open loads the file and returns the requests it made and the console
// errors and warnings it logged, 500 ms after the load event.
func (b *browser) open(ctx context.Context, t *testing.T, url string) (requests, problems []string) {
	b.call(ctx, t, "Page.navigate", map[string]any{"url": url})
	var late <-chan time.Time
	for {
		select {
		case ev, ok := <-b.c.events:
			if !ok {
				t.Fatalf("browser exited\n%s", b.stderr.String())
			}
			var method string
			_ = json.Unmarshal(ev["method"], &method)
			params := string(ev["params"])
			switch method {
			case "Page.loadEventFired":
				late = time.After(500 * time.Millisecond)
			case "Runtime.exceptionThrown":
				problems = append(problems, "exception: "+params)
			case "Runtime.consoleAPICalled":
				if strings.Contains(params, `"type":"error"`) || strings.Contains(params, `"type":"warning"`) {
					problems = append(problems, "console: "+params)
				}
			case "Log.entryAdded":
				if strings.Contains(params, `"level":"error"`) || strings.Contains(params, `"level":"warning"`) {
					problems = append(problems, "log: "+params)
				}
			case "Network.requestWillBeSent":
				var p struct{ Request struct{ URL string } }
				_ = json.Unmarshal(ev["params"], &p)
				requests = append(requests, p.Request.URL)
			}
		case <-late:
			return requests, problems
		case <-ctx.Done():
			t.Fatal("page did not load")
		}
	}
}

// layoutScript measures the page at the first screen's width: every text
// label's box (each SVG <text>, and each line of each HTML text node, cut
// to what scrolling boxes show), the
// pairs that overlap by more than a pixel each way, the page's widths and
// where the verdict ends.
const layoutScript = `JSON.stringify((function(){
  var boxes=[];
  function add(r,label,node){if(r.width>0.5&&r.height>0.5){boxes.push({l:r.left+scrollX,t:r.top+scrollY,r:r.right+scrollX,b:r.bottom+scrollY,label:label,node:node});}}
  var id=0;
  document.querySelectorAll('svg text').forEach(function(e){add(e.getBoundingClientRect(),'svg '+(e.closest('svg').id)+': '+e.textContent,id++);});
  // Text a scrolling box clips is not shown: each text line's box is cut to
  // what its scrolling ancestors show.
  function clip(el,r){
    var l=r.left,t=r.top,rr=r.right,b=r.bottom;
    for(var e=el;e&&e!==document.body;e=e.parentElement){var s=getComputedStyle(e);
      if(s.overflowX!=='visible'||s.overflowY!=='visible'){var c=e.getBoundingClientRect();l=Math.max(l,c.left);t=Math.max(t,c.top);rr=Math.min(rr,c.right);b=Math.min(b,c.bottom);}}
    return {left:l,top:t,right:rr,bottom:b,width:rr-l,height:b-t};
  }
  var w=document.createTreeWalker(document.body,NodeFilter.SHOW_TEXT,{acceptNode:function(n){
    var p=n.parentElement;
    if(!n.textContent.trim()||!p||p.closest('svg,script,style,select')){return NodeFilter.FILTER_REJECT;}
    return NodeFilter.FILTER_ACCEPT;}});
  var n;
  while((n=w.nextNode())){var rg=document.createRange();rg.selectNodeContents(n);var me=id++;
    Array.prototype.forEach.call(rg.getClientRects(),function(r){add(clip(n.parentElement,r),'html <'+n.parentElement.tagName.toLowerCase()+'>: '+n.textContent.trim().slice(0,50),me);});}
  var overlaps=[];
  for(var i=0;i<boxes.length;i++){for(var j=i+1;j<boxes.length;j++){var a=boxes[i],b=boxes[j];
    if(a.node===b.node){continue;}
    if(Math.min(a.r,b.r)-Math.max(a.l,b.l)>1&&Math.min(a.b,b.b)-Math.max(a.t,b.t)>1){overlaps.push(a.label+'  ×  '+b.label);}}}
  var v=document.getElementById('verdict'),d=document.getElementById('decision');
  return {labels:boxes.length,overlaps:overlaps.slice(0,20),overlapCount:overlaps.length,
    scrollWidth:document.documentElement.scrollWidth,clientWidth:document.documentElement.clientWidth,
    verdictTop:v?v.getBoundingClientRect().top+scrollY:-1,verdictBottom:v?v.getBoundingClientRect().bottom+scrollY:-1,
    decision:d?d.textContent:'',pageHeight:document.documentElement.scrollHeight,
    plots:Array.from(document.querySelectorAll('svg.plot')).map(function(p){return {id:p.id,points:p.querySelectorAll('.point').length,named:p.querySelectorAll('.point[data-candidate]').length};})};
})())`

type layout struct {
	Labels, OverlapCount      int
	Overlaps                  []string
	ScrollWidth, ClientWidth  int
	VerdictTop, VerdictBottom float64
	Decision                  string
	PageHeight                int
	Plots                     []struct {
		ID            string
		Points, Named int
	}
}

// shot captures the page (the first screen, or all of it) as PNG into
// the temp dir and returns its path, byte size, size in pixels and share
// of pixels that are not white.
func (b *browser) shot(ctx context.Context, t *testing.T, name string, full bool, height int) (path string, bytes, w, h int, ink float64) {
	params := map[string]any{"format": "png"}
	if full {
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": screenW, "height": height, "scale": 1}
	}
	raw := b.call(ctx, t, "Page.captureScreenshot", params)
	var s struct{ Data string }
	_ = json.Unmarshal(raw, &s)
	img, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(os.TempDir(), "ctxopt-report-"+name+".png")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(strings.NewReader(string(img)))
	if err != nil {
		t.Fatal(err)
	}
	inked, total := 0, 0
	r := decoded.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := decoded.At(x, y).RGBA()
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				inked++
			}
			total++
		}
	}
	return path, len(img), r.Dx(), r.Dy(), float64(inked) / float64(total)
}

// TestReportsInBrowser opens both reports from disk in headless Chromium
// at 1200×800: a run report and a strategy comparison of make demo's eight
// candidates. Each page makes no request but itself and logs no error;
// every plot's data points are in the DOM; no two text labels (SVG or
// HTML) overlap; nothing scrolls sideways; the verdict ends within the
// first screen; and the screenshots are not blank.
func TestReportsInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b := startBrowser(ctx, t)

	runDir := t.TempDir()
	run := runFixture(t, runDir)
	if err := WriteRun(runDir, run); err != nil {
		t.Fatal(err)
	}
	evalDir := t.TempDir()
	strategies := strategiesFixture(t)
	if err := Write(evalDir, strategies, "ctxopt eval: demo", strategiesLead(strategies)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, page string
		res        *eval.Result
		decision   string
	}{
		{"run", filepath.Join(runDir, HTMLFile), run.Eval, "PROMOTE"},
		{"strategies", filepath.Join(evalDir, HTMLFile), strategies, "Verdicts under the default rule"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := "file://" + tt.page
			requests, problems := b.open(ctx, t, url)
			for _, r := range requests {
				if r != url {
					t.Errorf("the page requested %s", r)
				}
			}
			if len(problems) > 0 {
				t.Errorf("console errors:\n%s", strings.Join(problems, "\n"))
			}
			var l layout
			b.eval(ctx, t, layoutScript, &l)
			plots := Plots(tt.res)
			if len(l.Plots) != len(plots) {
				t.Fatalf("%d plots in the DOM, want %d: %+v", len(l.Plots), len(plots), l.Plots)
			}
			for i, p := range plots {
				if d := l.Plots[i]; d.ID != p.ID || d.Points != p.Points || d.Named != p.Points || p.Points == 0 {
					t.Errorf("plot %s: %d points (%d named) in the DOM, drew %d", p.ID, d.Points, d.Named, p.Points)
				}
			}
			t.Logf("%d text labels, %d overlapping pairs; page %d px wide in a %d px window, %d px high; verdict from %.0f to %.0f px",
				l.Labels, l.OverlapCount, l.ScrollWidth, l.ClientWidth, l.PageHeight, l.VerdictTop, l.VerdictBottom)
			if l.OverlapCount > 0 {
				t.Errorf("%d pairs of text labels overlap, e.g.:\n%s", l.OverlapCount, strings.Join(l.Overlaps, "\n"))
			}
			if l.Labels < 100 {
				t.Errorf("only %d text labels measured: the check would pass on an empty page", l.Labels)
			}
			if l.ScrollWidth > l.ClientWidth || l.ClientWidth > screenW {
				t.Errorf("the page scrolls sideways: %d px wide in a %d px window", l.ScrollWidth, l.ClientWidth)
			}
			if l.VerdictTop < 0 || l.VerdictBottom > screenH {
				t.Errorf("the verdict spans %.0f to %.0f px, want it within the first %d px", l.VerdictTop, l.VerdictBottom, screenH)
			}
			if !strings.Contains(l.Decision, tt.decision) {
				t.Errorf("decision %q lacks %q", l.Decision, tt.decision)
			}
			for _, full := range []bool{false, true} {
				name := tt.name + map[bool]string{false: "-first-screen", true: "-full"}[full]
				path, size, w, h, ink := b.shot(ctx, t, name, full, l.PageHeight)
				t.Logf("screenshot %s: %d bytes, %dx%d px, %.1f%% non-white", path, size, w, h, 100*ink)
				if ink < 0.01 {
					t.Errorf("screenshot %s looks blank: %.2f%% non-white", path, 100*ink)
				}
			}
		})
	}
}
