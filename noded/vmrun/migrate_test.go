package vmrun

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"corral/internal/ident"
	"corral/noded"
)

// TestAgentFollowsALoopbackMigration migrates a running VM (the bare
// initramfs: no share blocks it, and QEMU names no blocker) to a second QEMU on this host, started
// with the same devices and -incoming, and reaches its guest agent before
// and after: the node's client reconnects to the destination's socket, and
// the agent answers there as if nothing happened.
func TestAgentFollowsALoopbackMigration(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\necho up\nwhile :; do sleep 1; done\n", 1, 256)
	v, err := r.start(context.Background(), spec, startOpts{accel: r.Accel(), agent: true})
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

	// The destination: the source's command line with its own files (the
	// devices are what must be identical) and -incoming, as an
	// unprivileged id of its own too.
	dst := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dst, 0o700)
	port := freePort(t)
	dv := launchDestination(t, r, v, dst, [2]string{spec.Stdout}, nil, "tcp:127.0.0.1:"+port)
	if dv.st.As.UID == v.st.As.UID && os.Geteuid() == 0 {
		t.Errorf("source and destination QEMU both run as uid %d", v.st.As.UID)
	}

	ctx := context.Background()
	if _, err := qmpExec(ctx, v.st.QMP,
		`{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":1073741824}}`,
		`{"execute":"migrate","arguments":{"uri":"tcp:127.0.0.1:`+port+`"}}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the migration to complete", 60*time.Second, func() bool {
		rep, err := qmpExec(ctx, v.st.QMP, "query-migrate")
		if err != nil {
			return false
		}
		var m struct {
			Return struct {
				Status string `json:"status"`
			} `json:"return"`
		}
		json.Unmarshal(rep[0], &m)
		if m.Return.Status == "failed" {
			t.Fatalf("migration failed: %s (destination: %s)", rep[0], tailFile(filepath.Join(dst, "qemu.log"), 3, 500))
		}
		return m.Return.Status == "completed"
	})
	qmpExec(ctx, v.st.QMP, "quit")
	waitResult(t, v, 30*time.Second)

	// The node follows the VM: its client now talks to the destination.
	v.agent.retarget(filepath.Join(dst, agentFile))
	after, _, res, err := runExec(t, v, req, "")
	if err != nil || res.Code != 0 {
		t.Fatalf("exec after the migration: %q %+v %v (destination console: %s)", after, res, err, tailFile(filepath.Join(dst, consoleFile), 5, 800))
	}
	if after != before {
		t.Errorf("the guest's boot id changed across the migration: %q, then %q", before, after)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// launchDestination starts, in the state directory dir, the QEMU a live
// migration of src goes to: src's command line (the same devices, the same
// descriptor numbers) and -incoming, with dir's own state files and
// sockets, a copy of src's initrd, and the job's output files opened for
// appending (the destination carries on writing them). It runs as an id
// of its own, as every VM's QEMU. tap is its network card's device (nil:
// none).
func launchDestination(t *testing.T, r *Runner, src *VM, dir string, outs [2]string, tap *os.File, incoming string) *VM {
	t.Helper()
	f := filesIn(dir)
	as, err := r.qemuIdentityFor(dir, src.st.Accel)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src.f.initrd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.initrd, b, 0o400); err != nil {
		t.Fatal(err)
	}
	os.Chown(f.initrd, int(as.UID), int(as.GID))
	var q qemuFiles
	defer q.close()
	q.set(fdTap, tap)
	for i, p := range outs {
		if p == "" {
			continue
		}
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		q.set(fdStdout+i, fh)
	}
	a := vmArgs{img: r.images[src.st.Image], f: f, agent: src.st.Agent != "",
		virtiofs: slices.Contains(src.st.Argv, virtiofsArgs()[3])}
	if err := openQEMUFiles(&q, a); err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string(nil), src.st.Argv...), "-incoming", incoming)
	v, err := r.launch(argv, &q, f, src.st.Image, src.st.Accel, "", nil, a.agent, as)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); <-v.done })
	if err := v.awaitMonitor(context.Background()); err != nil {
		t.Fatal(err)
	}
	return v
}
