package vmrun

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/ident"
	"corral/noded"
)

// TestAgentFollowsALoopbackMigration migrates a running VM (the bare
// initramfs: no share blocks it) to a second QEMU on this host, started
// with the same devices and -incoming, and reaches its guest agent before
// and after: the node's client reconnects to the destination's socket, and
// the agent answers there as if nothing happened.
func TestAgentFollowsALoopbackMigration(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\necho up\nwhile :; do sleep 1; done\n", 1, 256)
	v, err := r.start(context.Background(), spec, startOpts{accel: r.accel, agent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); v.Wait() })
	req := noded.ExecRequest{Argv: []string{"cat", "/proc/sys/kernel/random/boot_id"}, Env: []string{"PATH=/usr/bin:/bin:/usr/sbin"}, Dir: "/", User: ident.User{Name: "root"}}
	before, _, res, err := runExec(t, v, req, "")
	if err != nil || res.Code != 0 || len(before) < 30 {
		t.Fatalf("exec before the migration: %q %+v %v", before, res, err)
	}

	// The destination: the source's command line with its own files (the
	// devices are what must be identical) and -incoming.
	dst := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dst, 0o700)
	copyFile(t, v.f.initrd, filepath.Join(dst, initrdFile))
	port := freePort(t)
	argv := []string{}
	for _, a := range v.st.Argv {
		argv = append(argv, strings.ReplaceAll(a, spec.Dir, dst))
	}
	argv = append(argv, "-incoming", "tcp:127.0.0.1:"+port)
	log, _ := os.Create(filepath.Join(dst, "qemu.log"))
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	dstQMP := filepath.Join(dst, qmpFile)
	waitFor(t, "the destination's monitor", 30*time.Second, func() bool {
		_, err := queryStatus(context.Background(), dstQMP)
		return err == nil
	})

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

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
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
