package vmrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/ident"
	"corral/noded"
	"corral/vmimage"
)

// runExec runs a command through h and returns its output and result.
func runExec(t testing.TB, h noded.JobAgent, req noded.ExecRequest, stdin string) (string, string, noded.ExecResult, error) {
	t.Helper()
	return runExecWithin(t, h, req, stdin, 60*time.Second)
}

// runExecWithin is runExec with limit for the whole request: the agent's
// client keeps dialling a VM's socket until its deadline.
func runExecWithin(t testing.TB, h noded.JobAgent, req noded.ExecRequest, stdin string, limit time.Duration) (string, string, noded.ExecResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	x, err := h.Exec(ctx, req)
	if err != nil {
		return "", "", noded.ExecResult{}, err
	}
	defer x.Close()
	go func() {
		io.WriteString(x.Stdin(), stdin)
		x.Stdin().Close()
	}()
	var out, errOut bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&errOut, x.Stderr()); close(done) }()
	io.Copy(&out, x.Stdout())
	<-done
	res, err := x.Wait()
	return out.String(), errOut.String(), res, err
}

// agentJob starts a VM job as nobody that waits for a USR1 and says so.
func agentJob(t *testing.T) (*Runner, *VM, noded.LaunchSpec, ident.User) {
	r := testRunner(t)
	u := lookupNobody(t)
	work := userWorkDir(t, u)
	script := `#!/bin/bash
trap 'echo got-usr1' USR1
echo started
for i in $(seq 120); do sleep 1; done
`
	spec := jobSpec(t, script, 1, 256)
	spec.User = u
	spec.WorkDir = work
	spec.Stdout = filepath.Join(work, "out.txt")
	spec.Shares = []string{work}
	v := start(t, r, spec)
	if v.agent == nil {
		t.Fatal("the VM has no agent: is the image older than protocol 3? (make image)")
	}
	return r, v, spec, u
}

// TestAgentExecFilesAndSignalsInAVM reaches into a running VM job through
// its guest agent: a command's output, stdin and exit code as the job's
// user, files written and read as the user (EACCES where the user may not),
// and a signal reaching the job's trap. The node's side of the channel then
// reconnects, as a restarted daemon would, and works again.
func TestAgentExecFilesAndSignalsInAVM(t *testing.T) {
	r, v, spec, u := agentJob(t)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
	as := noded.ExecRequest{Env: env, Dir: spec.WorkDir, User: u}

	start := time.Now()
	as.Argv = []string{"sh", "-c", "id -u; cat; echo oops >&2; exit 7"}
	out, errOut, res, err := runExec(t, v, as, "from stdin\n")
	if err != nil || res.Code != 7 || out != strconv.Itoa(int(u.UID))+"\nfrom stdin\n" || errOut != "oops\n" {
		t.Fatalf("exec: %q %q %+v %v", out, errOut, res, err)
	}
	t.Logf("first exec (the agent was booting) took %v", time.Since(start))
	start = time.Now()
	as.Argv = []string{"true"}
	if _, _, res, err := runExec(t, v, as, ""); err != nil || res.Code != 0 {
		t.Fatalf("exec true: %+v %v", res, err)
	}
	t.Logf("exec true took %v", time.Since(start))

	ctx := context.Background()
	w, err := v.WriteFile(ctx, filepath.Join(spec.WorkDir, "in.txt"), 0o600, u)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "copied in\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(spec.WorkDir, "in.txt"), &st); err != nil || st.Uid != u.UID || st.Mode&0o777 != 0o600 {
		t.Fatalf("in.txt on the host: %+v %v", st, err)
	}
	rd, info, err := v.ReadFile(ctx, filepath.Join(spec.WorkDir, "in.txt"), u)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || string(b) != "copied in\n" || info.Size != 10 || info.Mode != 0o600 {
		t.Fatalf("read back %q %+v %v", b, info, err)
	}
	secret := filepath.Join(spec.WorkDir, "secret")
	os.WriteFile(secret, []byte("root only\n"), 0o600)
	if _, _, err := v.ReadFile(ctx, secret, u); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("reading a root-only file as %s: %v, want EACCES", u.Name, err)
	}
	if _, err := v.WriteFile(ctx, "/etc/corral-test", 0o644, u); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("writing /etc as %s: %v, want EACCES", u.Name, err)
	}

	waitFor(t, "the job to start", 30*time.Second, func() bool {
		b, _ := os.ReadFile(spec.Stdout)
		return strings.Contains(string(b), "started")
	})
	if err := v.Signal(ctx, syscall.SIGUSR1, noded.SignalAll); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's trap", 30*time.Second, func() bool {
		b, _ := os.ReadFile(spec.Stdout)
		return strings.Contains(string(b), "got-usr1")
	})

	// A restarted daemon: the old connection goes, a new handle connects.
	v.agent.close()
	h, _, err := r.Recover(spec.Dir)
	if err != nil {
		t.Fatal(err)
	}
	v2 := h.(*VM)
	as.Argv = []string{"echo", "again"}
	if out, _, res, err := runExec(t, v2, as, ""); err != nil || out != "again\n" || res.Code != 0 {
		t.Fatalf("exec after reconnecting: %q %+v %v", out, res, err)
	}
	v.Kill(0)
	waitResult(t, v, 30*time.Second)
	if _, err := os.Stat(v.f.agentSock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the agent socket outlives the VM: %v", err)
	}
	// The VM is gone, and no migration moved its agent elsewhere: an exec
	// fails at once, saying so, instead of redialling the socket until
	// its deadline.
	waitFor(t, "the recovered handle to see its VM gone", 30*time.Second, v2.ended)
	as.Argv = []string{"true"}
	began := time.Now()
	_, _, _, err = runExecWithin(t, v2, as, "", 30*time.Second)
	if !errors.Is(err, noded.ErrAgentUnavailable) || !strings.Contains(err.Error(), "the job's VM has ended") {
		t.Fatalf("exec into an ended VM: %v, want ErrAgentUnavailable saying the VM has ended", err)
	}
	t.Logf("exec into the ended VM refused after %v", time.Since(began).Round(time.Millisecond))
}

// BenchmarkAgentExecRoundTrip measures one `true` through the agent of a
// running VM job: request, fork and exec in the guest, exit status back.
func BenchmarkAgentExecRoundTrip(b *testing.B) {
	r := testRunner(b)
	spec := jobSpec(b, "#!/bin/sh\nsleep 600\n", 1, 256)
	v := start(b, r, spec)
	req := noded.ExecRequest{Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", User: ident.User{Name: "root"}}
	if _, _, _, err := runExec(b, v, req, ""); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, res, err := runExec(b, v, req, ""); err != nil || res.Code != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkAgentRoundTrip measures the channel alone: a request the
// guest answers without starting anything (a signal to an exec session
// that does not exist).
func BenchmarkAgentRoundTrip(b *testing.B) {
	r := testRunner(b)
	spec := jobSpec(b, "#!/bin/sh\nsleep 600\n", 1, 256)
	v := start(b, r, spec)
	msg := vmimage.SignalRequest{Signal: int(syscall.SIGUSR1), Scope: vmimage.SignalExec, Exec: 1}
	ctx := context.Background()
	if err := signalRequest(ctx, v.agent, msg); !errors.Is(err, syscall.ESRCH) {
		b.Fatalf("signal to no session: %v, want ESRCH", err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := signalRequest(ctx, v.agent, msg); !errors.Is(err, syscall.ESRCH) {
			b.Fatal(err)
		}
	}
}
