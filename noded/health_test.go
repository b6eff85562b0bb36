package noded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestRunHealthCheck runs health check programs: exit 0 passes; a
// failure's output, its lines joined, is the reason; a silent failure says
// its status; one that outlasts its timeout fails saying so; a long output
// is clipped to what a report carries.
func TestRunHealthCheck(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := map[string]struct {
		program string
		ok      bool
		output  string
	}{
		"passes":        {script("ok", "echo fine; exit 0"), true, "fine"},
		"fails, saying": {script("full", "echo '/scratch is full'; echo 'fan 2 stopped' >&2; exit 1"), false, "/scratch is full; fan 2 stopped"},
		"fails silent":  {script("silent", "exit 3"), false, "exited with status 3"},
		"hangs":         {script("hang", "echo checking; sleep 30"), false, "checking (timed out after 300ms)"},
		"says a lot":    {script("long", "yes x | head -n 2000 | tr -d '\\n'; exit 1"), false, strings.Repeat("x", api.MaxHealthOutput-4) + " ..."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := runHealthCheck(context.Background(), tc.program, 300*time.Millisecond)
			if h.OK != tc.ok || !strings.Contains(h.Output, tc.output) || len(h.Output) > api.MaxHealthOutput {
				t.Errorf("got %+v; want ok=%v with output containing %q (at most %d bytes)", h, tc.ok, tc.output, api.MaxHealthOutput)
			}
		})
	}
}

// TestDaemonReportsHealth runs a daemon with a health check that fails
// until a file appears: the controllers get the failure with its output,
// then the pass.
func TestDaemonReportsHealth(t *testing.T) {
	f := newFakeCtl(t)
	dir := t.TempDir()
	flag := filepath.Join(dir, "healthy")
	check := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(check, []byte("#!/bin/sh\n[ -e "+flag+" ] && exit 0\necho 'no network'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, f, t.TempDir(), func(c *Config) { c.HealthCheck, c.HealthInterval = check, 50*time.Millisecond })
	seen := func(ok bool, output string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, h := range f.health {
			if h.OK == ok && h.Output == output {
				return true
			}
		}
		return false
	}
	waitFor(t, "the failing check's report", 10*time.Second, func() bool { return seen(false, "no network") })
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the passing check's report", 10*time.Second, func() bool { return seen(true, "") })
}
