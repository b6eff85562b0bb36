package vmrun

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStreamFileRoundTrip saves a running guest's state to a file the
// daemon opened (saveState: getfd and migrate to it) and loads it into a
// new VM of the same job (Incoming.File): the guest's counter goes on
// where it stopped, in the same output file, and the source's QEMU ended.
func TestStreamFileRoundTrip(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\ni=0\nwhile :; do echo $i; i=$((i+1)); sleep 0.1; done\n", 1, 128)
	o := startOpts{accel: r.Accel(), agent: true}
	src, err := r.start(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Kill(0); <-src.done })
	waitFor(t, "the first lines", 60*time.Second, func() bool { return len(outputLines(spec.Stdout)) >= 3 })
	if err := src.Pause(); err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(t.TempDir(), "guest.state")
	f, err := os.OpenFile(stream, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	st, err := src.saveState(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	src.Kill(0)
	waitResult(t, src, 30*time.Second)
	before := outputLines(spec.Stdout)
	fi, _ := f.Stat()
	t.Logf("saved %d KiB in %v (%d KiB of RAM sent) after %d lines", fi.Size()>>10, st.Total, st.RAMBytes>>10, len(before))

	f.Seek(0, 0)
	o.incoming = &Incoming{File: f, Appending: true}
	spec.Dir = t.TempDir()
	dst, err := r.start(context.Background(), spec, o)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Kill(0); <-dst.done })
	// It was saved paused, and QEMU keeps the run state it was saved in.
	if state, err := dst.waitIncoming(context.Background()); err != nil || state != "paused" {
		t.Fatalf("waitIncoming = %q, %v; want paused", state, err)
	}
	if err := dst.Continue(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the guest to go on", 30*time.Second, func() bool { return len(outputLines(spec.Stdout)) >= len(before)+3 })
	lines := outputLines(spec.Stdout)
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("line %d is %q: the counter did not go on where it stopped:\n%s", i, l, strings.Join(lines, "\n"))
		}
	}
}

// outputLines returns the complete lines of a file.
func outputLines(path string) []string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}
