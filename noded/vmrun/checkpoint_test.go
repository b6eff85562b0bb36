package vmrun

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointRoundTrip parks a job that appends to a file on its shared
// path in a checkpoint (its guest stopped, its state and handle keys in a
// file), ends its VM, and starts it again from the file in a new state
// directory, as another node would: it goes on appending where it stopped,
// through a new file server whose handles are the old ones', and ends with
// every line once, in order.
func TestCheckpointRoundTrip(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	const n = 100
	spec := jobSpec(t, appendScript(n), 1, 256)
	spec.Args = []string{spec.Dir}
	log := filepath.Join(spec.Dir, "log.txt")
	src := start(t, r, spec)
	waitFor(t, "the first appends", 60*time.Second, func() bool { return lineCount(log) >= 15 })
	file := filepath.Join(t.TempDir(), "job.ckpt")
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := src.SaveCheckpoint(context.Background(), f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	at := lineCount(log)
	src.Kill(0)
	waitResult(t, src, 30*time.Second)
	if got := lineCount(log); got != at {
		t.Fatalf("the job appended %d lines after its checkpoint was saved", got-at)
	}

	f, err = os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := r.StartFromCheckpoint(context.Background(), withDir(spec, t.TempDir()), f)
	if err != nil {
		t.Fatal(err)
	}
	dst := h.(*VM)
	t.Cleanup(func() { dst.Kill(0); <-dst.done })
	if !bytesEqual(dst.handleKey(), src.handleKey()) {
		t.Error("the restored VM's file server does not serve with the checkpoint's handle key")
	}
	if err := dst.Continue(); err != nil {
		t.Fatal(err)
	}
	res := waitResult(t, dst, 90*time.Second)
	if res.ExitCode != 0 || !strings.Contains(readFile(t, spec.Stdout), "appended") {
		t.Fatalf("the restored job's result %+v; console: %s", res, tailFile(dst.f.console, 20, 3000))
	}
	checkLines(t, log, n)
	fi, _ := os.Stat(file)
	t.Logf("saved after %d lines: %d MiB in %s; all %d lines there", at, fi.Size()>>20, stats.Total, n)
}

// TestCheckpointHeader reads back what it writes, and refuses a file that
// is not a checkpoint.
func TestCheckpointHeader(t *testing.T) {
	var b bytes.Buffer
	if err := writeCheckpointHeader(&b, []byte(`{"handle_key":"AA=="}`)); err != nil {
		t.Fatal(err)
	}
	b.WriteString("QEVM")
	pre, err := readCheckpointHeader(&b)
	if err != nil || string(pre) != `{"handle_key":"AA=="}` || b.String() != "QEVM" {
		t.Fatalf("read %q, %v; left %q", pre, err, b.String())
	}
	if _, err := readCheckpointHeader(strings.NewReader("QEVM\x00\x00\x00\x03 and more")); err == nil {
		t.Error("a QEMU stream without the header was taken for a checkpoint")
	}
}

// FuzzCheckpointHeader reads arbitrary bytes as a checkpoint's header: it
// never takes a prelude larger than its bound.
func FuzzCheckpointHeader(f *testing.F) {
	var b bytes.Buffer
	writeCheckpointHeader(&b, []byte("{}"))
	f.Add(b.Bytes())
	f.Add([]byte(checkpointMagic + "\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pre, err := readCheckpointHeader(bytes.NewReader(data))
		if err == nil && len(pre) > maxCheckpointPrelude {
			t.Fatalf("a prelude of %d bytes", len(pre))
		}
	})
}
