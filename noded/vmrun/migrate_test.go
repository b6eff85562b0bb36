package vmrun

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/ident"
	"corral/noded"
)

// migrationParams are the bounds the tests migrate with: the daemon's
// defaults' kind, bandwidth raised well above QEMU's 128 MiB/s.
var migrationParams = noded.MigrationParams{Downtime: 100 * time.Millisecond, MaxBandwidth: 4 << 30, MaxTime: 2 * time.Minute, AutoConverge: true}

// incoming starts, in a state directory of its own (as on another node),
// the destination of a migration of the job spec describes, with the
// options o (StartIncoming's, or fewer for a bare guest).
func incoming(t testing.TB, r *Runner, spec noded.LaunchSpec, o startOpts) *VM {
	t.Helper()
	spec.Dir = t.TempDir()
	o.accel = r.Accel()
	v, err := r.startIncoming(context.Background(), spec, o)
	if err != nil {
		t.Fatalf("starting the destination: %v", err)
	}
	t.Cleanup(func() { v.Kill(0); <-v.done })
	return v
}

// linkPair returns the two ends of a TCP connection on the loopback: the
// network between two node daemons.
func linkPair(t testing.TB) (src, dst net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	src, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dst = <-acc
	t.Cleanup(func() { src.Close(); dst.Close() })
	return src, dst
}

// migrate streams src to dst over a loopback link, as two daemons do
// (prelude, then the stream), and returns the source's figures and the
// destination's verdict.
func migrate(t testing.TB, src, dst *VM, p noded.MigrationParams) (noded.MigrationStats, error, error) {
	t.Helper()
	a, b := linkPair(t)
	pre, err := src.MigrationPrelude()
	if err != nil {
		t.Fatal(err)
	}
	recv := make(chan error, 1)
	go func() { recv <- dst.Receive(context.Background(), pre, b) }()
	stats, err := src.MigrateOut(context.Background(), a, p)
	if err != nil {
		a.Close() // a failed source: the destination's stream ends
	}
	select {
	case rerr := <-recv:
		return stats, err, rerr
	case <-time.After(60 * time.Second):
		t.Fatal("the destination never took the stream")
	}
	return stats, err, nil
}

// switchOver does what the daemons do once the controllers agree: quit the
// source (stopped after its completed stream) and continue the
// destination.
func switchOver(t testing.TB, src, dst *VM) {
	t.Helper()
	if st, _, err := src.MigrationState(); err != nil || st != "completed" {
		t.Fatalf("the source's migration state is %q (%v), want completed", st, err)
	}
	if ok, err := dst.Loaded(); !ok || err != nil {
		t.Fatalf("the destination says loaded=%v (%v)", ok, err)
	}
	src.Kill(0)
	waitResult(t, src, 30*time.Second)
	if err := dst.Continue(); err != nil {
		t.Fatal(err)
	}
}

// TestAgentFollowsALoopbackMigration migrates a running VM (the bare
// initramfs: no share blocks it, and QEMU names no blocker for it) to a
// destination on this host, started with the same devices and -incoming,
// and reaches its guest agent before and after: the destination's client
// talks to its own socket, and the agent answers there as if nothing
// happened.
func TestAgentFollowsALoopbackMigration(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\necho up\nwhile :; do sleep 1; done\n", 1, 256)
	o := startOpts{accel: r.Accel(), agent: true}
	v, err := r.start(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); v.Wait() })
	assertMigratable(t, v)
	req := noded.ExecRequest{Argv: []string{"cat", "/proc/sys/kernel/random/boot_id"}, Env: []string{"PATH=/usr/bin:/bin:/usr/sbin"}, Dir: "/", User: ident.User{Name: "root"}}
	before, _, res, err := runExec(t, v, req, "")
	if err != nil || res.Code != 0 || len(before) < 30 {
		t.Fatalf("exec before the migration: %q %+v %v", before, res, err)
	}
	dv := incoming(t, r, spec, startOpts{agent: true})
	if !slices.Equal(withoutName(dv.st.Argv[:len(dv.st.Argv)-3]), withoutName(v.st.Argv)) || !slices.Equal(dv.st.Argv[len(dv.st.Argv)-3:], []string{"-incoming", "defer", "-S"}) {
		t.Errorf("the destination's command line is not the source's and -incoming defer -S:\n%q\n%q", dv.st.Argv, v.st.Argv)
	}
	if dv.st.As.UID == v.st.As.UID && os.Geteuid() == 0 {
		t.Errorf("source and destination QEMU both run as uid %d", v.st.As.UID)
	}
	if _, serr, rerr := migrate(t, v, dv, migrationParams); serr != nil || rerr != nil {
		t.Fatalf("migration: source %v, destination %v (destination: %s)", serr, rerr, tailFile(dv.f.qemuLog, 3, 500))
	}
	switchOver(t, v, dv)
	after, _, res, err := runExec(t, dv, req, "")
	if err != nil || res.Code != 0 {
		t.Fatalf("exec after the migration: %q %+v %v (destination console: %s)", after, res, err, tailFile(dv.f.console, 5, 800))
	}
	if after != before {
		t.Errorf("the guest's boot id changed across the migration: %q, then %q", before, after)
	}
}

// counterScript prints 0, 1, 2, ... to stdout, one a line, as fast as
// usleep lets it (every 20 ms asked), rewriting memMB MiB of memory
// between lines when memMB > 0 (a busy guest, which dirties memory as the
// stream copies it).
func counterScript(memMB int) string {
	return `#!/bin/sh
i=0
` + map[bool]string{true: `dd if=/dev/zero of=/dev/shm/busy bs=1M count=` + strconv.Itoa(memMB) + ` 2>/dev/null
`, false: ""}[memMB > 0] + `while :; do
	echo $i
	i=$((i+1))
` + map[bool]string{true: `	dd if=/dev/urandom of=/dev/shm/busy bs=64k count=16 seek=$((i % (` + strconv.Itoa(memMB) + `*16))) conv=notrunc 2>/dev/null
`, false: ""}[memMB > 0] + `	usleep 20000
done
`
}

// checkCounter checks that the output file holds 0..n-1, each once, in
// order, with n at least least, and returns n.
func checkCounter(t *testing.T, path string, least int) int {
	t.Helper()
	text := readFile(t, path)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if !strings.HasSuffix(text, "\n") && len(lines) > 0 {
		lines = lines[:len(lines)-1] // a line being written
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("%s: line %d is %q, want %d (a gap, a repeat or a reorder)", path, i+1, l, i)
		}
	}
	if len(lines) < least {
		t.Fatalf("%s counted to %d, want at least %d", path, len(lines), least)
	}
	return len(lines)
}

// TestMigrationAbortsLeaveTheSourceRunning aborts two migrations of one
// busy VM, a stream cut midway and a stream that completed but was not
// switched over (the source is then continued, the destination, which
// never ran, killed), then completes a third: the job's output counts on
// without a gap or a repeat through all of it, and the figures of the
// completed one are QEMU's.
func TestMigrationAbortsLeaveTheSourceRunning(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, counterScript(16), 1, 128)
	v, err := r.start(context.Background(), spec, startOpts{accel: r.Accel()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); v.Wait() })
	waitFor(t, "the counter", 60*time.Second, func() bool { return lineCount(spec.Stdout) >= 5 })

	// A stream cut midway: a slow link, closed after a moment.
	d1 := incoming(t, r, spec, startOpts{})
	a, b := linkPair(t)
	pre, _ := v.MigrationPrelude()
	recv := make(chan error, 1)
	go func() { recv <- d1.Receive(context.Background(), pre, b) }()
	slow := migrationParams
	slow.MaxBandwidth, slow.AutoConverge = 4<<20, false
	sent := make(chan error, 1)
	go func() { _, err := v.MigrateOut(context.Background(), a, slow); sent <- err }()
	time.Sleep(300 * time.Millisecond)
	b.Close()
	if err := <-sent; err == nil {
		t.Fatal("the source's migration completed over a cut link")
	}
	if err := <-recv; err == nil {
		t.Fatal("the destination loaded a state from a cut link")
	}
	waitResult(t, d1, 30*time.Second)
	if err := v.ResumeAfterMigration(); err != nil {
		t.Fatal(err)
	}
	n := lineCount(spec.Stdout)
	waitFor(t, "the counter to go on at the source", 30*time.Second, func() bool { return lineCount(spec.Stdout) > n+3 })

	// A completed stream, aborted before the switch.
	d2 := incoming(t, r, spec, startOpts{})
	if _, serr, rerr := migrate(t, v, d2, migrationParams); serr != nil || rerr != nil {
		t.Fatalf("migration: source %v, destination %v", serr, rerr)
	}
	n = lineCount(spec.Stdout)
	time.Sleep(200 * time.Millisecond)
	if m := lineCount(spec.Stdout); m != n {
		t.Fatalf("the counter went on (%d to %d lines) while the source was stopped after its stream and the destination waited", n, m)
	}
	d2.Kill(0)
	waitResult(t, d2, 30*time.Second)
	if err := v.ResumeAfterMigration(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the counter to go on at the source", 30*time.Second, func() bool { return lineCount(spec.Stdout) > n+3 })

	// The real one.
	d3 := incoming(t, r, spec, startOpts{})
	stats, serr, rerr := migrate(t, v, d3, migrationParams)
	if serr != nil || rerr != nil {
		t.Fatalf("migration: source %v, destination %v", serr, rerr)
	}
	switchOver(t, v, d3)
	n = lineCount(spec.Stdout)
	waitFor(t, "the counter to go on at the destination", 30*time.Second, func() bool { return lineCount(spec.Stdout) > n+5 })
	d3.Kill(0)
	waitResult(t, d3, 30*time.Second)
	got := checkCounter(t, spec.Stdout, n+5)
	if stats.Total <= 0 || stats.RAMBytes <= 0 {
		t.Errorf("the completed migration's figures %+v lack its time or bytes", stats)
	}
	t.Logf("counted to %d through two aborts and a migration: total %s, downtime %s, %d bytes", got, stats.Total, stats.Downtime, stats.RAMBytes)
	if _, err := os.Stat(filepath.Join(d1.f.dir, stateFile)); err != nil {
		t.Errorf("the failed destination's record: %v", err)
	}
}

// withoutName drops -name (which names the state directory) from argv.
func withoutName(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		if argv[i] == "-name" {
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}
