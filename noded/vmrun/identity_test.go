package vmrun

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/vmimage"
)

// procStatus returns the fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestQEMURunsUnprivileged starts two job VMs at once (one with the
// default NFS share, one with virtiofs) and reads what each QEMU runs as from /proc: real, effective,
// saved and file-system uid and gid all one id of the VM range (the one
// vm.json records), a different id for each VM, no supplementary groups
// (TCG needs no /dev/kvm), no capabilities, no_new_privs set. Both jobs
// run and their output arrives in the files the daemon opened as the
// job's user; the job's initrd belongs to the VM's id alone.
func TestQEMURunsUnprivileged(t *testing.T) {
	guestOnly(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the runner changes QEMU's uid only when the daemon is root")
	}
	r := testRunner(t)
	var vms []*VM
	for i := 0; i < 2; i++ {
		spec := jobSpec(t, "#!/bin/sh\necho hello from $(id -u)\nsleep 20\n", 1, 256)
		if i == 1 {
			spec.Share = vmimage.ShareVirtiofs // --no-migrate: a connection to virtiofsd
		}
		v := start(t, r, spec)
		vms = append(vms, v)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("VM %d: qemu.log %s; console %s", i, tailFile(v.f.qemuLog, 5, 800), tailFile(v.f.console, 5, 800))
			}
		})
		waitFor(t, "the job's output", 90*time.Second, func() bool {
			return strings.Contains(readFile(t, spec.Stdout), "hello from 0")
		})
	}
	seen := map[string]bool{}
	for i, v := range vms {
		st := procStatus(t, v.st.PID)
		uid, gid := itoa(int(v.st.As.UID)), itoa(int(v.st.As.GID))
		if !r.cfg.VMIDs.contains(v.st.As.UID) || v.st.As.UID == 0 {
			t.Errorf("VM %d: recorded uid %d is not in the VM range %+v", i, v.st.As.UID, r.cfg.VMIDs)
		}
		want := map[string]string{
			"Uid": strings.Repeat(uid+" ", 3) + uid, "Gid": strings.Repeat(gid+" ", 3) + gid,
			"Groups": "", "CapInh": "0000000000000000", "CapPrm": "0000000000000000",
			"CapEff": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
		}
		for k, w := range want {
			if st[k] != w {
				t.Errorf("VM %d (pid %d): %s: %q, want %q", i, v.st.PID, k, st[k], w)
			}
		}
		if seen[uid] {
			t.Errorf("VM %d: uid %s is another running VM's too", i, uid)
		}
		seen[uid] = true
		fi, err := os.Stat(v.f.initrd)
		if err != nil {
			t.Fatal(err)
		}
		if s := fi.Sys().(*syscall.Stat_t); s.Uid != v.st.As.UID || fi.Mode().Perm() != 0o400 {
			t.Errorf("VM %d: the initrd is uid %d mode %o, want uid %d mode 400", i, s.Uid, fi.Mode().Perm(), v.st.As.UID)
		}
	}
}

// TestTakeIDSkipsWhatRuns: an id some process of the node runs as (a VM
// of an earlier daemon that Recover has not re-adopted yet) is not handed
// out, nor one this runner holds; a released id is free again.
func TestTakeIDSkipsWhatRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another uid")
	}
	rng := IDRange{First: 0x7fff0000, Count: 3}
	r := &Runner{cfg: Config{VMIDs: rng}}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rng.First, Gid: rng.First}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	got := []uint32{}
	t.Cleanup(func() {
		for i := range rng.Count {
			releaseID(rng.First+i, heldIDs.m[rng.First+i])
		}
	})
	for _, dir := range []string{"/a", "/b"} {
		id, err := r.takeID(dir)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if got[0] != rng.First+1 || got[1] != rng.First+2 {
		t.Errorf("takeID gave %v, want %d and %d (the first runs a process)", got, rng.First+1, rng.First+2)
	}
	if _, err := r.takeID("/c"); err == nil || !strings.Contains(err.Error(), "widen the range") {
		t.Errorf("a full range: %v, want an error saying to widen it", err)
	}
	releaseID(got[0], "/a")
	if id, err := r.takeID("/d"); err != nil || id != got[0] {
		t.Errorf("after a release: %d, %v; want %d", id, err, got[0])
	}
}

// TestIDRangeCheck: ranges that would hand out root, the "no id" value or
// nothing are refused.
func TestIDRangeCheck(t *testing.T) {
	cases := map[string]struct {
		r  IDRange
		ok bool
	}{
		"default":         {DefaultVMIDs, true},
		"empty":           {IDRange{First: 100000}, false},
		"from root":       {IDRange{First: 0, Count: 10}, false},
		"up to (uid_t)-1": {IDRange{First: 0xFFFFFFF0, Count: 16}, false},
		"just below it":   {IDRange{First: 0xFFFFFFF0, Count: 15}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := tc.r.check(); (err == nil) != tc.ok {
				t.Errorf("check(%+v) = %v, want ok %v", tc.r, err, tc.ok)
			}
		})
	}
}
