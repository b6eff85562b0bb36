//go:build !corral_client

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// simTrace is sim's FCFS example: five jobs on 4 processors whose FCFS
// waits are 0, 90, 130, 120 and 140 s (mean 96), one of them killed at its
// limit, and one job skipped for having no processor count.
const simTrace = `; MaxProcs: 4
1   0  -1 100  4  -1 -1  4 100 -1 1 1 1 -1 -1 -1 -1 -1
2  10  -1  50  2  -1 -1  2  60 -1 1 1 1 -1 -1 -1 -1 -1
3  20  -1  30  3  -1 -1 -1  -1 -1 1 1 1 -1 -1 -1 -1 -1
4  30  -1   5  1  -1 -1  1 200 -1 1 1 1 -1 -1 -1 -1 -1
5  40  -1 300  2  -1 -1  2 100 -1 0 1 1 -1 -1 -1 -1 -1
6  50  -1  10 -1  -1 -1 -1  10 -1 1 1 1 -1 -1 -1 -1 -1
`

func writeSimTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.swf")
	if err := os.WriteFile(path, []byte(simTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimCommand(t *testing.T) {
	path := writeSimTrace(t)
	ctx := context.Background()

	r := runCLI(t, ctx, "", "corral", "sim", "--policy", "fcfs", "--json", path)
	if r.code != 0 {
		t.Fatalf("sim --json: exit %d, stderr %q", r.code, r.stderr)
	}
	var got struct {
		Trace    string  `json:"trace"`
		Policy   string  `json:"policy"`
		Jobs     int     `json:"jobs"`
		Timeouts int     `json:"timeouts"`
		MeanWait float64 `json:"mean_wait_s"`
		Makespan int64   `json:"makespan_s"`
		Skipped  struct {
			NoProcessors int `json:"no_processors"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("sim --json printed %q: %v", r.stdout, err)
	}
	if got.Trace != "small.swf" || got.Policy != "fcfs" || got.Jobs != 5 || got.Timeouts != 1 ||
		got.MeanWait != 96 || got.Makespan != 280 || got.Skipped.NoProcessors != 1 {
		t.Errorf("sim --json = %+v", got)
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q, want nothing (no terminal, no --progress)", r.stderr)
	}

	// The default policy is EASY, under which job 4 backfills: waits 0,
	// 90, 130, 70 and 140 s.
	r = runCLI(t, ctx, "", "corral", "sim", "--progress", path)
	if r.code != 0 || !strings.Contains(r.stdout, "policy       easy") || !strings.Contains(r.stdout, "mean 86 s (1.4 min), median 90 s (1.5 min)") {
		t.Errorf("sim --progress: exit %d, stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "100% 5/5 jobs") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("sim --progress: stderr %q, want a bar that reaches 100%% and ends its line", r.stderr)
	}
}

func TestSimCommandUsageErrors(t *testing.T) {
	path := writeSimTrace(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"no trace":         {args: nil, want: "give one trace file"},
		"two traces":       {args: []string{path, path}, want: "give one trace file"},
		"unknown policy":   {args: []string{"--policy", "sjf", path}, want: `--policy: unknown scheduling policy "sjf": use fcfs, easy or conservative`},
		"missing file":     {args: []string{filepath.Join(t.TempDir(), "none.swf")}, want: "cannot open the trace"},
		"misspelt option":  {args: []string{"--polcy", "easy", path}, want: "did you mean --policy?"},
		"not an SWF trace": {args: []string{writeFile(t, "bad.swf", "hello world\n")}, want: "bad.swf: line 1: 2 fields, want 18"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, context.Background(), "", append([]string{"corral", "sim"}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure saying %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The bar redraws at most every barRefresh, but always draws the end.
func TestProgressBarThrottles(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	bar := &progressBar{w: &out, now: func() time.Time { return clock }}
	for done := 1; done <= 1000; done++ {
		clock = clock.Add(time.Millisecond)
		bar.update(done, 1000)
	}
	bar.finish()
	// Draws at 1 ms, then every 100 ms (101, 201, ..., 901), then at 1000.
	if n := strings.Count(out.String(), "\r"); n != 11 {
		t.Errorf("%d redraws in 1 s of updates, want 11:\n%q", n, out.String())
	}
	if !strings.HasSuffix(out.String(), "100% 1000/1000 jobs\n") {
		t.Errorf("last draw = %q, want the full bar and a newline", out.String()[strings.LastIndex(out.String(), "\r"):])
	}
}
