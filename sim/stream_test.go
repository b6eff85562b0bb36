package sim

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"corral/api"
	"corral/ctld/sched"
)

// runBoth runs a trace with RunSWF (streamed when r seeks) and with
// ReadSWF then Run, and requires the same result or the same error.
func runBoth(t *testing.T, data []byte, opts Options, seek bool) (Result, error) {
	t.Helper()
	var want Result
	tr, wantErr := ReadSWF(bytes.NewReader(data))
	if wantErr == nil {
		want, wantErr = Run(tr, opts)
	}
	var r io.Reader = bytes.NewReader(data)
	if !seek {
		r = io.MultiReader(r) // not an io.Seeker
	}
	got, err := RunSWF(r, opts)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("RunSWF error = %v, want %v (ReadSWF, then Run)", err, wantErr)
	}
	got.Wall, got.Trace, want.Wall, want.Trace = 0, "", 0, ""
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RunSWF result differs from ReadSWF then Run:\n got %+v\nwant %+v", got, want)
	}
	return got, err
}

// lightTrace writes an SWF trace of n jobs that keep a machine of procs
// processors about half busy, so that its queue stays short (the
// conservative passes of an overloaded trace of this length take minutes).
func lightTrace(seed uint64, procs, n int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	fmt.Fprintf(&b, "; MaxProcs: %d\n", procs)
	submit := int64(0)
	for id := 1; id <= n; id++ {
		submit += int64(r.IntN(120))
		run, req, size := r.IntN(600), 1+r.IntN(600), 1+r.IntN(procs/4)
		fmt.Fprintf(&b, "%d %d -1 %d %d -1 -1 %d %d -1 1 %d %d -1 %d -1 -1 -1\n", id, submit, run, size, size, req, 1+r.IntN(5), 1+r.IntN(3), 1+r.IntN(2))
	}
	return b.String()
}

func gzipped(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRunSWFAsRun requires RunSWF to give what ReadSWF then Run give, on
// traces it streams (more jobs than one chunk, compressed or not, with
// the policies, a cluster with GPU jobs and preemption) and on those it
// must read whole first (jobs out of queue order, a header after the first
// job that changes the machine, a reader that cannot seek).
func TestRunSWFAsRun(t *testing.T) {
	text := lightTrace(3, 16, chunkLen+500)
	lines := strings.SplitAfter(text, "\n")
	shuffled := slices.Clone(lines)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled)-2, func(i, j int) {
		shuffled[i+1], shuffled[j+1] = shuffled[j+1], shuffled[i+1]
	})
	late := strings.Join(lines[:200], "") + "; MaxProcs: 24\n" + strings.Join(lines[200:], "")
	same := strings.Join(lines[:200], "") + "; MaxProcs: 16\n; Note: x\n" + strings.Join(lines[200:], "")
	preempt := Options{Policy: sched.PolicyEASY, QOS: []api.QOS{{Name: "high", Priority: 100, Preempt: []string{"low"}},
		{Name: "low", PreemptMode: api.PreemptRequeue}}, QOSByQueue: map[int64]string{1: "high", 2: "low"}}
	cluster, err := ReadCluster(strings.NewReader(clusterJSON))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		data []byte
		opts Options
		seek bool
		// streams: RunSWF simulates while reading, not after.
		streams bool
	}{
		"easy":                      {[]byte(text), Options{}, true, true},
		"fcfs gzip":                 {gzipped(t, text), Options{Policy: sched.PolicyFCFS}, true, true},
		"conservative":              {[]byte(text), Options{Policy: sched.PolicyConservative}, true, true},
		"preemption":                {[]byte(text), preempt, true, true},
		"fair-share":                {[]byte(text), Options{Fairshare: true}, true, true},
		"cluster with GPU jobs":     {[]byte(text), Options{Cluster: cluster}, true, true},
		"not in queue order":        {[]byte(strings.Join(shuffled, "")), Options{}, true, false},
		"late header":               {[]byte(late), Options{}, true, false},
		"late header, same machine": {[]byte(same), Options{}, true, true},
		"not seekable":              {gzipped(t, text), Options{}, false, true},
		"an unknown policy":         {[]byte(text), Options{Policy: "sjf"}, true, false},
		"a bad QoS":                 {[]byte(text), Options{QOS: []api.QOS{{Name: "x", Preempt: []string{"y"}}}}, true, true},
		"empty":                     {nil, Options{}, true, false},
		"header only":               {[]byte("; MaxProcs: 4\n"), Options{}, true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			runBoth(t, tc.data, tc.opts, tc.seek)
			if _, err := runStreamed(bytes.NewReader(tc.data), tc.opts); errors.Is(err, errReread) != !tc.streams {
				t.Errorf("runStreamed: error %v; want streamed: %v", err, tc.streams)
			}
		})
	}
}

// TestRunSWFErrors requires RunSWF's errors to be ReadSWF's and Run's, in
// their order: a parse error anywhere before an error of the queue, which
// comes before the simulation's.
func TestRunSWFErrors(t *testing.T) {
	const job = "1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
	text := lightTrace(5, 8, 2*chunkLen)
	lines := strings.SplitAfter(text, "\n")
	at := func(i int, s string) string { return strings.Join(lines[:i], "") + s + strings.Join(lines[i:], "") }
	tests := map[string]string{
		"no machine size":         job,
		"a repeated job":          "; MaxProcs: 2\n" + job + job,
		"a job number of 0":       "; MaxProcs: 2\n0" + job[1:],
		"a repeat after a 0":      "; MaxProcs: 2\n" + job + "0" + job[1:] + job,
		"a late repeat":           at(len(lines)-1, lines[3]),
		"a late 0":                at(len(lines)-1, "0"+lines[3][strings.IndexByte(lines[3], ' '):]),
		"a parse error after a 0": at(len(lines)-1, "0"+lines[3][strings.IndexByte(lines[3], ' '):]+"1 2 3\n"),
		"a late parse error":      at(len(lines)-1, "1 2 3\n"),
		"a late header error":     at(len(lines)-1, "; MaxProcs: many\n"),
		"a first line error":      "; MaxProcs: 2\n1 2 3\n",
		"a job too large":         "; MaxProcs: 1\n" + strings.Replace(job, " 1 -1 -1 1 ", " 2 -1 -1 2 ", 1),
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := runBoth(t, []byte(text), Options{}, true)
			if name != "a job too large" && err == nil {
				t.Errorf("no error")
			}
		})
	}
}

// TestRunSWFStop stops a streamed simulation and requires ErrStopped, with
// the reading goroutine gone.
func TestRunSWFStop(t *testing.T) {
	text := lightTrace(9, 8, 3*chunkLen)
	stop := make(chan struct{})
	close(stop)
	_, err := RunSWF(bytes.NewReader(gzipped(t, text)), Options{Stop: stop})
	if !errors.Is(err, ErrStopped) {
		t.Errorf("RunSWF with Stop closed: error = %v, want ErrStopped", err)
	}
}

// TestRunSWFArchive runs the archive's traces both ways.
func TestRunSWFArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds per trace")
	}
	for _, name := range []string{kthTrace, lanlTrace} {
		t.Run(name, func(t *testing.T) {
			openTrace(t, name) // skips when absent
			dir := os.Getenv("CORRAL_TRACES")
			if dir == "" {
				dir = filepath.Join("..", "..", "shared", "traces")
			}
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			runBoth(t, data, Options{}, true)
		})
	}
}

// TestNoOutcomes requires the same figures without the outcomes, and none
// of them.
func TestNoOutcomes(t *testing.T) {
	text := lightTrace(11, 8, 500)
	with := runTrace(t, text, Options{})
	without := runTrace(t, text, Options{NoOutcomes: true})
	if without.Outcomes != nil || len(with.Outcomes) != with.Jobs {
		t.Fatalf("outcomes: %d with, %d without (want %d and none)", len(with.Outcomes), len(without.Outcomes), with.Jobs)
	}
	with.Outcomes, with.Wall, without.Wall = nil, 0, 0
	if !reflect.DeepEqual(with, without) {
		t.Errorf("figures differ without the outcomes:\n%+v\n%+v", without, with)
	}
}
