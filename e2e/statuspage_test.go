package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"corral/api"
)

// artifactDir is where a test keeps what a person may want to look at
// after it ran (screenshots): $CORRAL_ARTIFACTS, else a directory under
// the system's temporary directory that outlives the test. The test logs
// the path of each file it keeps.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CORRAL_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "corral-artifacts")
	}
	dir = filepath.Join(dir, t.Name()+"-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startBrowser starts Debian's Chromium, headless, in a user data
// directory of its own, and returns a context whose tab the test drives.
// One browser serves every case of a test.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the status page test needs Debian's chromium (scripts/install-deps.sh installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline of its own
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	return ctx
}

// TestStatusPageInChromium runs a controller and a node daemon with jobs
// that run, wait for resources, are held and wait for a dependency, one of
// them named <script>alert(1)</script>, and loads the status page in a
// real headless Chromium: the queue the browser renders has the rows
// `corral queue` prints (ids, states, users, reasons), the hostile name
// shows as text (no script element, no dialog), the usage plot loads as
// an image, and a waiting job's page says why it waits. Screenshots of
// both pages are kept (the log says where).
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a controller, a node daemon and Chromium")
	}
	c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "2G")
	work := t.TempDir()
	run1 := c.submit(t, work, "-J", "<script>alert(1)</script>", "-o", "/dev/null", "--wrap", "sleep 60")
	run2 := c.submit(t, work, "-J", "second", "-o", "/dev/null", "--wrap", "sleep 60")
	waits := c.submit(t, work, "-J", "waits", "-c", "2", "-o", "/dev/null", "--wrap", "true")
	held := c.submit(t, work, "-J", "held", "-H", "-o", "/dev/null", "--wrap", "true")
	c.submit(t, work, "-J", "after", "-d", "afterok:"+held, "-o", "/dev/null", "--wrap", "true")
	t.Cleanup(func() { _, _ = cli(t, c.addr, work, "cancel", "--user", "tester") })
	cl := c.client(t)
	for _, id := range []string{run1, run2} {
		waitJob(t, cl, mustID(t, id), api.StateRunning, 30*time.Second)
	}
	// A pending job's reason is set by the pass after its submission
	// committed: compare once every pending job has one.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if out, err = cli(t, c.addr, work, "queue", "-h", "-o", "%i|%t|%u|%R"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "(None)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pending job still has no reason after 30s:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := strings.Split(strings.TrimRight(out, "\n"), "\n")

	ctx := startBrowser(t)
	var dialogs atomic.Int32
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range events {
			if err != nil {
				return
			}
			dialogs.Add(1)
		}
	}()
	dir := artifactDir(t)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	base := c.http[0]

	if err := chromedp.Do(tctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("queue-table"))); err != nil {
		t.Fatalf("loading %s/ui/: %v", base, err)
	}
	rows, err := chromedp.Run(tctx, chromedp.Evaluate[[][]string](
		`Array.from(document.querySelectorAll('#queue-table tbody tr')).map(tr => Array.from(tr.cells).map(td => td.textContent))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) || len(rows) != 5 {
		t.Fatalf("the browser shows %d queue rows %q; corral queue printed %d:\n%s", len(rows), rows, len(want), out)
	}
	for i, r := range rows {
		// JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)
		if got := strings.Join([]string{r[0], r[4], r[3], r[7]}, "|"); got != want[i] {
			t.Errorf("queue row %d in the browser: %s; corral queue: %s", i, got, want[i])
		}
		if r[0] == run1 && r[2] != "<script>alert(1)</script>" {
			t.Errorf("job %s's name shows as %q, want the text <script>alert(1)</script>", run1, r[2])
		}
	}
	scripts, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('script').length`))
	if err != nil || scripts != 0 {
		t.Errorf("the page holds %d script elements (%v), want none", scripts, err)
	}
	plot, err := chromedp.Run(tctx, chromedp.Evaluate[[]int](
		`(async () => { const img = document.querySelector('img.plot'); await img.decode(); return [img.naturalWidth, img.naturalHeight]; })()`,
		chromedp.EvalAwaitPromise))
	if err != nil || len(plot) != 2 || plot[0] < 100 || plot[1] < 100 {
		t.Errorf("the usage plot did not load as an image: %v %v", plot, err)
	}
	keepScreenshot(t, tctx, filepath.Join(dir, "status-page.png"))

	if err := chromedp.Do(tctx, chromedp.Navigate(fmt.Sprintf("%s/ui/jobs/%s", base, waits)), chromedp.WaitVisible(chromedp.ID("why"))); err != nil {
		t.Fatal(err)
	}
	why, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector('#why').textContent`))
	if err != nil || !strings.Contains(why, "Job "+waits+" is PENDING, reason Resources") {
		t.Errorf("job %s's page says why: %q (%v)", waits, why, err)
	}
	show, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector('#show').textContent`))
	if err != nil || !strings.Contains(show, "JobId="+waits+" ") || !strings.Contains(show, "JobName=waits") {
		t.Errorf("job %s's page shows %q (%v)", waits, show, err)
	}
	keepScreenshot(t, tctx, filepath.Join(dir, "job-page.png"))
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened: the job's name ran as a script", n)
	}
}

// keepScreenshot saves a screenshot of the tab's whole page to path, as
// PNG (quality 100; below it Chromium sends JPEG).
func keepScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("screenshot kept: %s (%d bytes)", path, len(png))
}
