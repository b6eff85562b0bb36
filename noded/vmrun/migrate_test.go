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

	// The destination: the same job started with -incoming in a state
	// directory of its own (the devices are what must be identical), as
	// an unprivileged id of its own too.
	dst := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dst, 0o700)
	port := freePort(t)
	dv := launchDestination(t, r, spec, o, dst, "tcp:127.0.0.1:"+port)
	if !slices.Equal(withoutName(dv.st.Argv[:len(dv.st.Argv)-2]), withoutName(v.st.Argv)) {
		t.Errorf("the destination's command line is not the source's and -incoming:\n%q\n%q", dv.st.Argv, v.st.Argv)
	}
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

// launchDestination starts, in the state directory dir, the VM a live
// migration of spec's VM (started with o) goes to: the same job started
// again with the incoming primitive (Incoming, startOpts.incoming), so the
// same devices, with dir's own state files and sockets, the job's output
// files opened for appending (the destination carries on writing them)
// and -incoming. It runs as an id of its own, as every VM's QEMU.
func launchDestination(t *testing.T, r *Runner, spec noded.LaunchSpec, o startOpts, dir, incoming string) *VM {
	t.Helper()
	spec.Dir = dir
	o.incoming = &Incoming{URI: incoming, Appending: true}
	v, err := r.start(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); <-v.done })
	return v
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
