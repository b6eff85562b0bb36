//go:build linux

package guestinit

import (
	"bytes"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// The agent's tests run it on the host over a socket pair, as root where
// they switch users, with the host's / as the job's root (or a temporary
// directory where resolution inside the root is the point). The host side
// here is a bare frame reader: noded/vmrun's client is tested against the
// real agent in a VM.

// one reaper per test process, as in the guest.
var testReaper = newReaper()

type peer struct {
	t   *testing.T
	f   *os.File
	dec vmimage.FrameDecoder
	got []vmimage.Frame // read and not taken yet
}

func startAgent(t *testing.T, root string) (*Agent, *peer) {
	t.Helper()
	return serveAgent(t, func(port *os.File) (*Agent, error) { return newAgent(port, root, testReaper, t.Logf) })
}

// serveAgent serves the agent newAgent makes on one end of a socket pair
// and returns it with a peer on the other, in a session.
func serveAgent(t *testing.T, newAgent func(port *os.File) (*Agent, error)) (*Agent, *peer) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	guestEnd, hostEnd := os.NewFile(uintptr(fds[0]), "guest"), os.NewFile(uintptr(fds[1]), "host")
	a, err := newAgent(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	a.exitOnEOF = true
	// kill(-1) from a test would reach every process of the host.
	a.signalAll = func(s unix.Signal) error { return unix.Kill(-int(a.jobPGID.Load()), s) }
	done := make(chan struct{})
	go func() { a.Serve(); close(done) }()
	t.Cleanup(func() {
		hostEnd.Close()
		<-done
		guestEnd.Close()
		if a.rootFD >= 0 {
			unix.Close(a.rootFD)
		}
	})
	p := &peer{t: t, f: hostEnd}
	p.send(vmimage.Frame{Type: vmimage.FrameHello, Payload: vmimage.EncodeMessage(vmimage.Hello{Version: 1, Nonce: "n"})})
	if h := p.expect(0, vmimage.FrameHello); !bytes.Contains(h.Payload, []byte(`"nonce":"n"`)) {
		t.Fatalf("hello answer %s", h.Payload)
	}
	return a, p
}

func (p *peer) send(f vmimage.Frame) {
	p.t.Helper()
	if _, err := p.f.Write(vmimage.AppendFrame(nil, f)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) request(id uint32, typ vmimage.FrameType, msg any) {
	p.send(vmimage.Frame{Type: typ, ID: id, Payload: vmimage.EncodeMessage(msg)})
}

// next returns the next frame of request id, failing after 10 s.
func (p *peer) next(id uint32) vmimage.Frame {
	p.t.Helper()
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i, f := range p.got {
			if f.ID == id {
				p.got = append(p.got[:i], p.got[i+1:]...)
				return f
			}
		}
		p.f.SetReadDeadline(deadline)
		n, err := p.f.Read(buf)
		if err != nil {
			p.t.Fatalf("waiting for a frame of request %d: %v", id, err)
		}
		p.dec.Write(buf[:n])
		for {
			f, ok := p.dec.Next()
			if !ok {
				break
			}
			p.got = append(p.got, f)
		}
	}
}

func (p *peer) expect(id uint32, typ vmimage.FrameType) vmimage.Frame {
	p.t.Helper()
	f := p.next(id)
	if f.Type != typ {
		p.t.Fatalf("request %d: got a %s frame (%q), want %s", id, f.Type, f.Payload, typ)
	}
	return f
}

// collect reads request id's frames up to its End, granting windows back,
// and returns its streams and End.
func (p *peer) collect(id uint32) (out, errOut string, end vmimage.End) {
	p.t.Helper()
	var o, e bytes.Buffer
	for {
		f := p.next(id)
		switch f.Type {
		case vmimage.FrameData:
			s, d, _ := vmimage.ParseData(f.Payload)
			if s == vmimage.StreamStderr {
				e.Write(d)
			} else {
				o.Write(d)
			}
			p.send(vmimage.Frame{Type: vmimage.FrameWindow, ID: id, Payload: vmimage.WindowPayload(s, uint32(len(d)))})
		case vmimage.FrameEnd:
			if err := vmimage.DecodeMessage(f.Payload, &end); err != nil {
				p.t.Fatal(err)
			}
			return o.String(), e.String(), end
		}
	}
}

func testUser(t *testing.T, name string) vmimage.AgentUser {
	t.Helper()
	if name == "root" {
		return vmimage.AgentUser{Name: "root"}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent acts as another user")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return vmimage.AgentUser{Name: name, UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
}

var hostEnv = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}

func TestAgentExecStreamsAndExitStatus(t *testing.T) {
	_, p := startAgent(t, "")
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"sh", "-c", "read x; echo out:$x; echo err >&2; exit 3"},
		Env: hostEnv, Dir: "/", User: testUser(t, "root")})
	p.expect(1, vmimage.FrameStarted)
	p.send(vmimage.Frame{Type: vmimage.FrameData, ID: 1, Payload: vmimage.DataPayload(0, []byte("hi\n"))})
	p.send(vmimage.Frame{Type: vmimage.FrameClose, ID: 1, Payload: []byte{0}})
	out, errOut, end := p.collect(1)
	if out != "out:hi\n" || errOut != "err\n" || end.Code != 3 || end.Errno != 0 {
		t.Fatalf("stdout %q, stderr %q, end %+v", out, errOut, end)
	}
}

func TestAgentExecRunsAsTheUser(t *testing.T) {
	nobody := testUser(t, "nobody")
	_, p := startAgent(t, "")
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"id", "-u"}, Env: hostEnv, Dir: "/", User: nobody})
	out, _, end := p.collect(1)
	if strings.TrimSpace(out) != strconv.Itoa(int(nobody.UID)) || end.Code != 0 {
		t.Fatalf("id -u printed %q, end %+v; want %d", out, end, nobody.UID)
	}
	// A command that is not there, and a directory the user cannot enter.
	p.request(2, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"no-such-command"}, Env: hostEnv, Dir: "/", User: nobody})
	if _, _, end := p.collect(2); end.Errno != int(unix.ENOENT) {
		t.Fatalf("a missing command: %+v", end)
	}
	p.request(3, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"true"}, Env: hostEnv, Dir: "/root", User: nobody})
	if _, _, end := p.collect(3); end.Errno != int(unix.EACCES) {
		t.Fatalf("exec in /root as nobody: %+v", end)
	}
}

func TestAgentTerminal(t *testing.T) {
	_, p := startAgent(t, "")
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"sh", "-c", "test -t 0 && test -t 1 && stty size"},
		Env: hostEnv, Dir: "/", User: testUser(t, "root"), TTY: true, Rows: 33, Cols: 101})
	out, _, end := p.collect(1)
	if end.Code != 0 || !strings.Contains(out, "33 101") {
		t.Fatalf("with a terminal: %q, %+v", out, end)
	}
}

func TestAgentFilesActAsTheUser(t *testing.T) {
	nobody := testUser(t, "nobody")
	root := t.TempDir()
	os.Chmod(root, 0o755)
	mine := filepath.Join(root, "mine")
	os.Mkdir(mine, 0o755)
	os.Chown(mine, int(nobody.UID), int(nobody.GID))
	os.WriteFile(filepath.Join(root, "secret"), []byte("root only\n"), 0o600)
	os.Symlink("/etc/hostname", filepath.Join(mine, "escape"))
	_, p := startAgent(t, root)

	write := func(id uint32, path string, data string) vmimage.End {
		p.request(id, vmimage.FrameWriteFile, vmimage.FileRequest{Path: path, User: nobody, Mode: 0o640})
		f := p.next(id)
		if f.Type == vmimage.FrameEnd {
			var e vmimage.End
			vmimage.DecodeMessage(f.Payload, &e)
			return e
		}
		p.send(vmimage.Frame{Type: vmimage.FrameData, ID: id, Payload: vmimage.DataPayload(0, []byte(data))})
		p.send(vmimage.Frame{Type: vmimage.FrameClose, ID: id, Payload: []byte{0}})
		_, _, e := p.collect(id)
		return e
	}
	if e := write(1, "/mine/new.txt", "hello\n"); e.Errno != 0 {
		t.Fatalf("writing in the user's directory: %+v", e)
	}
	st, err := os.Stat(filepath.Join(mine, "new.txt"))
	if err != nil || st.Sys().(*syscall.Stat_t).Uid != nobody.UID || st.Mode().Perm() != 0o640 {
		t.Fatalf("the written file: %v %v", st, err)
	}
	if e := write(2, "/not-mine.txt", "x"); e.Errno != int(unix.EACCES) {
		t.Fatalf("writing in root's directory: %+v", e)
	}
	read := func(id uint32, path string) (string, vmimage.End) {
		p.request(id, vmimage.FrameReadFile, vmimage.FileRequest{Path: path, User: nobody})
		out, _, e := p.collect(id)
		return out, e
	}
	if out, e := read(3, "/mine/new.txt"); out != "hello\n" || e.Errno != 0 {
		t.Fatalf("reading back: %q %+v", out, e)
	}
	if _, e := read(4, "/secret"); e.Errno != int(unix.EACCES) {
		t.Fatalf("reading a root-only file: %+v", e)
	}
	// The link's target is resolved inside the job's root, where it is not.
	if _, e := read(5, "/mine/escape"); e.Errno != int(unix.ENOENT) {
		t.Fatalf("reading through a link out of the root: %+v", e)
	}
	if _, e := read(6, "/mine"); e.Errno != int(unix.EISDIR) {
		t.Fatalf("reading a directory: %+v", e)
	}
}

func TestAgentSignalsAndCancel(t *testing.T) {
	a, p := startAgent(t, "")
	root := testUser(t, "root")
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"sh", "-c", `trap 'echo got; exit 0' USR1; echo ready; while :; do sleep 0.05; done`},
		Env: hostEnv, Dir: "/", User: root})
	p.expect(1, vmimage.FrameStarted)
	if f := p.expect(1, vmimage.FrameData); !bytes.Contains(f.Payload, []byte("ready")) {
		t.Fatalf("first output %q", f.Payload)
	}
	p.request(2, vmimage.FrameSignal, vmimage.SignalRequest{Signal: int(unix.SIGUSR1), Scope: vmimage.SignalExec, Exec: 1})
	if _, _, e := p.collect(2); e.Errno != 0 {
		t.Fatalf("signal: %+v", e)
	}
	if out, _, end := p.collect(1); !strings.Contains(out, "got") || end.Code != 0 {
		t.Fatalf("after USR1: %q %+v", out, end)
	}
	// The batch scope needs the job's script.
	p.request(3, vmimage.FrameSignal, vmimage.SignalRequest{Signal: int(unix.SIGUSR1), Scope: vmimage.SignalBatch})
	if _, _, e := p.collect(3); e.Errno != int(unix.ESRCH) {
		t.Fatalf("signal to no script: %+v", e)
	}
	// A cancelled exec's process group is killed, and so is one of a
	// session the host replaced.
	for i, stop := range []func(){
		func() { p.send(vmimage.Frame{Type: vmimage.FrameCancel, ID: 4}) },
		func() {
			p.send(vmimage.Frame{Type: vmimage.FrameHello, Payload: vmimage.EncodeMessage(vmimage.Hello{Version: 1, Nonce: "again"})})
			p.expect(0, vmimage.FrameHello)
		},
	} {
		id := uint32(4 + i)
		p.request(id, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"sleep", "100"}, Env: hostEnv, Dir: "/", User: root})
		var st vmimage.Started
		vmimage.DecodeMessage(p.expect(id, vmimage.FrameStarted).Payload, &st)
		stop()
		waitGone(t, i, st.PID)
	}
	_ = a
}

func waitGone(t *testing.T, i, pid int) {
	t.Helper()
	for n := 0; n < 200; n++ {
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("case %d: process %d still runs", i, pid)
}

func TestAgentFlowControl(t *testing.T) {
	_, p := startAgent(t, "")
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"head", "-c", "1000000", "/dev/zero"},
		Env: hostEnv, Dir: "/", User: testUser(t, "root")})
	p.expect(1, vmimage.FrameStarted)
	// Without grants the agent stops at its window.
	got := 0
	for got < vmimage.AgentWindow {
		s, d, _ := vmimage.ParseData(p.expect(1, vmimage.FrameData).Payload)
		if s != vmimage.StreamStdout {
			t.Fatalf("stream %d", s)
		}
		got += len(d)
	}
	if got != vmimage.AgentWindow {
		t.Fatalf("sent %d bytes without a grant, window %d", got, vmimage.AgentWindow)
	}
	time.Sleep(100 * time.Millisecond)
	p.f.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := p.f.Read(make([]byte, 1)); n > 0 {
		t.Fatal("the agent sent past its window")
	}
	p.send(vmimage.Frame{Type: vmimage.FrameWindow, ID: 1, Payload: vmimage.WindowPayload(1, uint32(got))})
	out, _, end := p.collect(1)
	if got+len(out) != 1000000 || end.Code != 0 {
		t.Fatalf("got %d bytes in all, end %+v", got+len(out), end)
	}
}

func TestAgentRefusesBadRequests(t *testing.T) {
	_, p := startAgent(t, "")
	p.send(vmimage.Frame{Type: vmimage.FrameExec, ID: 1, Payload: []byte(`{"argv":[],"dir":"/"}`)})
	if _, _, e := p.collect(1); e.Errno != int(unix.EINVAL) || !strings.Contains(e.Error, "no command") {
		t.Fatalf("an empty argv: %+v", e)
	}
	p.send(vmimage.Frame{Type: vmimage.FrameReadFile, ID: 2, Payload: []byte(`{"path":"/etc/../etc/passwd","user":{"name":"root"}}`)})
	if _, _, e := p.collect(2); e.Errno != int(unix.EINVAL) {
		t.Fatalf("an unclean path: %+v", e)
	}
	p.send(vmimage.Frame{Type: vmimage.FrameExec, ID: 3, Payload: []byte(`{"argv":["id"],"dir":"/","user":{"name":"root"},"shell":true}`)})
	if _, _, e := p.collect(3); e.Errno != int(unix.EINVAL) {
		t.Fatalf("an unknown field: %+v", e)
	}
}

// FuzzAgentRequest feeds the guest's request decoding what a host could
// send: any payload for any request type. The agent must refuse what does
// not validate, and what it accepts must be within the protocol's limits.
func FuzzAgentRequest(f *testing.F) {
	f.Add(uint8(vmimage.FrameExec), []byte(`{"argv":["id"],"env":["A=b"],"dir":"/","user":{"name":"u","uid":1,"gid":1}}`))
	f.Add(uint8(vmimage.FrameReadFile), []byte(`{"path":"/x","user":{"name":"u"}}`))
	f.Add(uint8(vmimage.FrameSignal), []byte(`{"signal":10,"scope":"all"}`))
	f.Add(uint8(vmimage.FrameWindow), []byte{1, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		var err error
		switch vmimage.FrameType(typ) {
		case vmimage.FrameExec:
			var x vmimage.ExecRequest
			if err = decodeValid(payload, &x); err == nil && (len(x.Argv) == 0 || len(x.Argv) > vmimage.MaxExecArgs || x.Dir == "" || x.Dir[0] != '/') {
				t.Fatalf("accepted %+v", x)
			}
		case vmimage.FrameReadFile, vmimage.FrameWriteFile:
			var x vmimage.FileRequest
			if err = decodeValid(payload, &x); err == nil && (x.Path == "" || x.Path[0] != '/' || strings.Contains(x.Path, "/../") || x.Mode > 0o777) {
				t.Fatalf("accepted %+v", x)
			}
		case vmimage.FrameSignal:
			var x vmimage.SignalRequest
			if err = decodeValid(payload, &x); err == nil && (x.Signal < 1 || x.Signal > 64) {
				t.Fatalf("accepted %+v", x)
			}
		case vmimage.FrameWindow:
			if _, n, err := vmimage.ParseWindow(payload); err == nil && (n == 0 || n > vmimage.AgentWindow) {
				t.Fatalf("accepted a window of %d", n)
			}
		case vmimage.FrameData:
			if s, _, err := vmimage.ParseData(payload); err == nil && s > vmimage.StreamStderr {
				t.Fatalf("accepted stream %d", s)
			}
		}
	})
}

// sendJob sends a FrameJob request with payload as its stream 0, within
// the window the agent grants.
func (p *peer) sendJob(id uint32, payload []byte) {
	p.t.Helper()
	p.request(id, vmimage.FrameJob, vmimage.JobStart{Seed: make([]byte, vmimage.SeedBytes), TimeUnixNano: time.Now().UnixNano(), Size: int64(len(payload))})
	credit := vmimage.AgentWindow
	for len(payload) > 0 {
		for credit == 0 {
			f := p.next(id)
			if f.Type != vmimage.FrameWindow {
				p.t.Fatalf("request %d: a %s frame (%q) while sending its payload", id, f.Type, f.Payload)
			}
			_, n, _ := vmimage.ParseWindow(f.Payload)
			credit += int(n)
		}
		n := min(len(payload), credit, vmimage.MaxDataChunk)
		p.send(vmimage.Frame{Type: vmimage.FrameData, ID: id, Payload: vmimage.DataPayload(0, payload[:n])})
		payload, credit = payload[n:], credit-n
	}
	p.send(vmimage.Frame{Type: vmimage.FrameClose, ID: id, Payload: []byte{0}})
}

// TestWarmAgentTakesItsJobFirst serves a restored guest's agent, which
// has no job yet: an exec sent first waits, the job (FrameJob) is taken
// once with its payload and a second is refused, and the exec runs once
// the job's root is set.
func TestWarmAgentTakesItsJobFirst(t *testing.T) {
	var got []byte
	taken := make(chan struct{})
	a, p := serveAgent(t, func(port *os.File) (*Agent, error) {
		a := newWaitingAgent(port, testReaper, t.Logf)
		a.onJob = func(x vmimage.JobStart, payload []byte) error { got = payload; close(taken); return nil }
		return a, nil
	})
	p.request(1, vmimage.FrameExec, vmimage.ExecRequest{Argv: []string{"echo", "hi"}, Env: hostEnv, Dir: "/", User: testUser(t, "root")})
	payload := bytes.Repeat([]byte("payload "), 100<<10) // over the agent's window
	p.sendJob(2, payload)
	for {
		f := p.next(2)
		if f.Type == vmimage.FrameEnd {
			var e vmimage.End
			if err := vmimage.DecodeMessage(f.Payload, &e); err != nil || e != (vmimage.End{}) {
				t.Fatalf("the job's End: %+v %v", e, err)
			}
			break
		}
		if f.Type != vmimage.FrameWindow {
			t.Fatalf("the job's request got a %s frame", f.Type)
		}
	}
	<-taken
	if !bytes.Equal(got, payload) {
		t.Errorf("onJob got %d bytes, want the %d sent", len(got), len(payload))
	}
	p.sendJob(3, []byte("again"))
	if _, _, end := p.collect(3); end.Errno != int(unix.EBUSY) {
		t.Errorf("a second job: %+v, want EBUSY", end)
	}
	for _, f := range p.got {
		if f.ID == 1 {
			t.Fatalf("the exec ran before the job's root was set: %s %q", f.Type, f.Payload)
		}
	}
	if err := a.setRoot(""); err != nil {
		t.Fatal(err)
	}
	if out, _, end := p.collect(1); out != "hi\n" || end.Code != 0 {
		t.Errorf("the exec once the job's root is set: %q %+v", out, end)
	}
}

// TestBootedAgentTakesNoJob checks that a guest booted with its job
// refuses another one.
func TestBootedAgentTakesNoJob(t *testing.T) {
	_, p := startAgent(t, "")
	p.sendJob(1, []byte("x"))
	if _, _, end := p.collect(1); end.Errno != int(unix.EBUSY) {
		t.Errorf("FrameJob to a booted guest: %+v, want EBUSY", end)
	}
}

// TestReseed credits bytes to this host's entropy pool and reseeds its
// random generator, as a restored guest's init does: the ioctls take the
// request as built (a wrong rand_pool_info is EINVAL).
func TestReseed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: RNDADDENTROPY and RNDRESEEDCRNG need CAP_SYS_ADMIN")
	}
	seed := make([]byte, vmimage.SeedBytes)
	for i := range seed {
		seed[i] = byte(i * 7)
	}
	if err := reseed(seed); err != nil {
		t.Fatal(err)
	}
}
