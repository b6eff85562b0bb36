package noded

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"

	"corral/internal/procref"
)

func TestLeaseTerms(t *testing.T) {
	cases := map[string]struct {
		ack  api.NodeAck
		want leaseTerms
		ok   bool
	}{
		"the controllers said nothing":        {api.NodeAck{}, leaseTerms{}, false},
		"the controllers' default":            {api.NodeAck{LeaseMS: 5000, NodeTimeoutMS: 10000}, leaseTerms{5 * time.Second, 10 * time.Second}, true},
		"a lease alone":                       {api.NodeAck{LeaseMS: 3000}, leaseTerms{3 * time.Second, 6 * time.Second}, true},
		"a timeout alone":                     {api.NodeAck{NodeTimeoutMS: 4000}, leaseTerms{2 * time.Second, 4 * time.Second}, true},
		"a lease too long for the kill grace": {api.NodeAck{LeaseMS: 9000, NodeTimeoutMS: 10000}, leaseTerms{5 * time.Second, 10 * time.Second}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := termsFrom(c.ack)
			if got != c.want || ok != c.ok {
				t.Errorf("termsFrom(%+v) = %+v, %v; want %+v, %v", c.ack, got, ok, c.want, c.ok)
			}
		})
	}
	// The timeline docs/architecture.md gives for the default node
	// timeout of 10 s and the daemon's defaults.
	d := leaseTerms{5 * time.Second, 10 * time.Second}
	figures := map[string]struct{ got, want time.Duration }{
		"kill grace":           {d.killGrace(5 * time.Second), 2 * time.Second},
		"short own kill grace": {d.killGrace(time.Second), time.Second},
		"heartbeat":            {d.heartbeat(time.Second), time.Second},
		"heartbeat, 2 s lease": {leaseTerms{2 * time.Second, 4 * time.Second}.heartbeat(time.Second), 500 * time.Millisecond},
		"heartbeat timeout":    {d.callTimeout(), 2500 * time.Millisecond},
		"keeper period":        {d.keeperPeriod(), 500 * time.Millisecond},
	}
	for name, f := range figures {
		if f.got != f.want {
			t.Errorf("%s: %s, want %s", name, f.got, f.want)
		}
	}
}

// TestLeaseFileRoundTrip renews a lease, checks the line the keeper reads
// against /proc/uptime, and loads it into another lease as the next daemon
// does.
func TestLeaseFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := newLease(dir)
	if !l.held(time.Now()) {
		t.Fatal("a node without a lease does not hold one")
	}
	sent := time.Now()
	if err := l.renew(sent, api.NodeAck{LeaseMS: 5000, NodeTimeoutMS: 10000}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, leaseFile))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 6 || f[3] != "0.50" || f[4] != "5000" || f[5] != "10000" {
		t.Fatalf("lease file %q", b)
	}
	up, _ := os.ReadFile("/proc/uptime")
	upSecs, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	n := make([]int64, 3)
	for i := range n {
		n[i], _ = strconv.ParseInt(f[i], 10, 64)
	}
	// Hundredths of a second of /proc/uptime's clock: the lease runs out
	// about 5 s from now, the keeper's SIGTERM 1 s later, SIGKILL 2 s later.
	if inSecs := float64(n[0])/100 - upSecs; inSecs < 4 || inSecs > 5.1 {
		t.Errorf("the lease runs out %.2fs from now by the file, want about 5s", inSecs)
	}
	if n[1]-n[0] != 100 || n[2]-n[0] != 200 {
		t.Errorf("keeper's TERM and KILL %d and %d hundredths after the lease, want 100 and 200", n[1]-n[0], n[2]-n[0])
	}

	next := newLease(dir)
	if err := next.load(); err != nil {
		t.Fatal(err)
	}
	terms, deadline := next.current()
	_, want := l.current()
	if terms != (leaseTerms{5 * time.Second, 10 * time.Second}) || deadline.Sub(want).Abs() > 20*time.Millisecond {
		t.Errorf("loaded %+v until %s, want the same terms until %s", terms, deadline, want)
	}
	// A renewal never shortens the lease; one sent after it ran out says
	// it lapsed.
	l.renew(sent.Add(-time.Second), api.NodeAck{})
	if _, d := l.current(); !d.Equal(want) {
		t.Errorf("an older renewal moved the deadline from %s to %s", want, d)
	}
	l.renew(want.Add(time.Millisecond), api.NodeAck{})
	if !l.lapsed {
		t.Error("a renewal sent after the deadline did not mark the lease lapsed")
	}
	os.WriteFile(filepath.Join(dir, leaseFile), []byte("garbage\n"), 0o600)
	if err := newLease(dir).load(); err == nil {
		t.Error("a garbled lease file was loaded")
	}
}

// TestRegistrationCarriesBoundedReports checks that a registration carries
// at most api.MaxRegisterReports reports and names the jobs of the rest in
// Running, so that the controllers fail none of them.
func TestRegistrationCarriesBoundedReports(t *testing.T) {
	f := newFakeCtl(t)
	d, err := New(Config{Name: "n1", CPUs: 2, MemMB: 1024, DataDir: t.TempDir(), Client: f.client(t), RunJobsAs: RunAsDaemon})
	if err != nil {
		t.Fatal(err)
	}
	d.running.Store(&[]uint64{7})
	n := api.MaxRegisterReports + 10
	for i := range n {
		k := jobKey{uint64(1000 + i), 1}
		d.rep.add(k, api.JobReport{JobID: k.ID, StartIndex: 1, State: api.StateCompleted})
	}
	info, keys := d.nodeInfo()
	if len(info.Reports) != api.MaxRegisterReports || len(keys) != api.MaxRegisterReports {
		t.Fatalf("registration carries %d reports (%d keys), want %d", len(info.Reports), len(keys), api.MaxRegisterReports)
	}
	want := []uint64{7}
	for i := api.MaxRegisterReports; i < n; i++ {
		want = append(want, uint64(1000+i))
	}
	if !slices.Equal(info.Running, want) {
		t.Errorf("running %v, want %v", info.Running, want)
	}
	for i, r := range info.Reports {
		if r.JobID != keys[i].ID {
			t.Fatalf("report %d is job %d, its key %v", i, r.JobID, keys[i])
		}
	}
}

// withLease makes f tell a lease of l and a node timeout of 2l.
func withLease(f *fakeCtl, l time.Duration) {
	f.leaseMS.Store(l.Milliseconds())
	f.timeoutMS.Store(2 * l.Milliseconds())
}

// TestDaemonLeaseFencesJobs cuts a running daemon off from the leader (its
// messages fail, its desired state is still served): when its lease runs
// out it stops its job, well before the node timeout, and starts none until
// a heartbeat is acknowledged again; then it reports the job NODE_FAIL and
// runs the job it was given meanwhile.
func TestDaemonLeaseFencesJobs(t *testing.T) {
	f := newFakeCtl(t)
	lease := time.Second
	withLease(f, lease)
	data, work := t.TempDir(), t.TempDir()
	w := mkdirs(t, work, "1", "2")
	d := startDaemon(t, f, data)
	j1 := f.addJob("n1", shJob(1, w[0], blockingScript(0)))
	waitFile(t, filepath.Join(w[0], "started"), 10*time.Second)
	for beats := f.heartbeats.Load(); f.heartbeats.Load() < beats+2; {
		time.Sleep(5 * time.Millisecond)
	}

	f.mute.Store(true)
	cut := time.Now()
	waitContent(t, filepath.Join(runDir(data, j1), exitFile), 10*time.Second)
	// The controllers would declare the node DOWN 2 s after its last
	// acknowledged heartbeat, which was before the cut.
	if took := time.Since(cut); took >= 2*lease {
		t.Errorf("the job ended %s after the cut, not before the node timeout of %s", took, 2*lease)
	}
	if d.log.count("lease expired") != 1 {
		t.Errorf("%d warnings of the lease's expiry, want 1", d.log.count("lease expired"))
	}
	f.addJob("n1", shJob(2, w[1], "touch started"))
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(w[1], "started")); err == nil {
		t.Fatal("a job started while the node's lease had run out")
	}

	f.mute.Store(false)
	r := f.waitReport(t, 1, 10*time.Second)
	if r.State != api.StateNodeFail || !strings.Contains(r.Message, "lease of 1s") {
		t.Errorf("report %+v, want NODE_FAIL saying the lease ran out", r)
	}
	waitFile(t, filepath.Join(w[1], "started"), 10*time.Second)
	if r := f.waitReport(t, 2, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("job 2 after the lease was renewed: %+v, want COMPLETED", r)
	}
	waitEmpty(t, data)
	checkReportedOnce(t, f, 1, 2)
}

// TestKeeperFencesFrozenDaemon stops a daemon with SIGSTOP while it runs a
// job that ignores SIGTERM: a frozen daemon kills nothing, so its lease
// keeper must (SIGTERM, then SIGKILL) before the node timeout. After
// SIGCONT the daemon reports the run as stopped for its lease, and the
// keeper exits once no run is left.
func TestKeeperFencesFrozenDaemon(t *testing.T) {
	f := newFakeCtl(t)
	lease := time.Second
	withLease(f, lease)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemonProcess(t, f, daemonProcessConfig{DataDir: data, KillGrace: 300 * time.Millisecond})
	j := f.addJob("n1", shJob(5, work, `trap '' TERM; touch started; while [ -e started ]; do sleep 0.01; done`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	waitContent(t, filepath.Join(runDir(data, j), sessionFile), 5*time.Second)
	// The keeper may be between an idle exit and its restart by the loop:
	// wait for the one that guards the run.
	var keeper keeperRecord
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := procref.ReadJSON(filepath.Join(data, keeperFile), &keeper)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease keeper recorded: %v", err)
		}
	}
	for beats := f.heartbeats.Load(); f.heartbeats.Load() < beats+2; {
		time.Sleep(5 * time.Millisecond)
	}

	d1.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	t.Cleanup(func() { d1.Process.Signal(syscall.SIGCONT) })
	waitContent(t, filepath.Join(runDir(data, j), fencedFile), 10*time.Second)
	// The shim records the script's end unless SIGKILL beats it to it: wait
	// for the job's processes rather than for its exit file.
	line := waitContent(t, filepath.Join(runDir(data, j), sessionFile), time.Second)
	pgid, _ := strconv.Atoi(strings.Fields(line)[0])
	for liveInGroup(pgid) > 0 {
		if time.Since(frozen) > 10*time.Second {
			t.Fatal("the frozen daemon's job still runs 10s after it froze")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(frozen); took >= 2*lease {
		t.Errorf("the job's processes were gone %s after the daemon froze, not before the node timeout of %s", took, 2*lease)
	}

	d1.Process.Signal(syscall.SIGCONT)
	r := f.waitReport(t, 5, 10*time.Second)
	if r.State != api.StateNodeFail || !strings.Contains(r.Message, "lease of 1s") {
		t.Errorf("report %+v, want NODE_FAIL saying the lease ran out", r)
	}
	waitEmpty(t, data)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ref, err := procref.Open(keeper.PID, keeper.Start, false)
		if err != nil {
			break
		}
		ref.Close()
		if time.Now().After(deadline) {
			t.Fatal("the lease keeper still runs 5s after the node's last run ended")
		}
	}
	checkReportedOnce(t, f, 5)
}

// TestRestartedDaemonKeepsLease SIGKILLs a daemon and starts the next one
// while no controller answers: the next daemon must count from the lease
// the first one held (the controllers count from its last heartbeat), not
// give its re-adopted job a lease of its own.
func TestRestartedDaemonKeepsLease(t *testing.T) {
	f := newFakeCtl(t)
	lease := time.Second
	withLease(f, lease)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemonProcess(t, f, daemonProcessConfig{DataDir: data, KillGrace: 300 * time.Millisecond})
	j := f.addJob("n1", shJob(6, work, blockingScript(0)))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	for beats := f.heartbeats.Load(); f.heartbeats.Load() < beats+2; {
		time.Sleep(5 * time.Millisecond)
	}
	f.setDown(true)
	sigkill(d1)
	killed := time.Now()
	d2 := startDaemon(t, f, data)
	waitContent(t, filepath.Join(runDir(data, j), exitFile), 10*time.Second)
	if took := time.Since(killed); took >= 2*lease {
		t.Errorf("the re-adopted job ended %s after the first daemon died, not before the node timeout of %s", took, 2*lease)
	}
	f.setDown(false)
	if r := f.waitReport(t, 6, 10*time.Second); r.State != api.StateNodeFail || !strings.Contains(r.Message, "lease") {
		t.Errorf("report %+v, want NODE_FAIL saying the lease ran out", r)
	}
	if d2.log.count("lease expired") != 1 {
		t.Errorf("the second daemon warned %d times of the lease's expiry, want once", d2.log.count("lease expired"))
	}
	waitEmpty(t, data)
}

// liveInGroup counts the processes of process group pgid that are not
// zombies (the shim of a frozen daemon stays one, unreaped).
func liveInGroup(pgid int) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procref.ReadStat(pid)
		if err == nil && st.PGID == pgid && !st.Ended() {
			n++
		}
	}
	return n
}
