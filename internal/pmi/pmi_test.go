package pmi

import (
	"bufio"
	"bytes"

	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWire(t *testing.T) {
	tests := map[string]struct {
		in   string
		cmd  string
		keys []string
		vals []string
	}{
		"v1":            {"cmd=put kvsname=12.0 key=card value=a\\ b\n", "put", []string{"kvsname", "key", "value"}, []string{"12.0", "card", "a b"}},
		"v1 token":      {"cmd=barrier_in\n", "barrier_in", nil, nil},
		"v2":            {v2("cmd=kvs-put;key=k;value=v=1;"), "kvs-put", []string{"key", "value"}, []string{"k", "v=1"}},
		"v2 no trailer": {v2("cmd=fullinit;pmirank=3"), "fullinit", []string{"pmirank"}, []string{"3"}},
	}
	for name, tc := range tests {
		m, err := readMessage(bufio.NewReader(strings.NewReader(tc.in)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.cmd != tc.cmd || !slices.Equal(m.keys, tc.keys) || !slices.Equal(m.vals, tc.vals) {
			t.Errorf("%s: %+v", name, m)
		}
		again, err := readMessage(bufio.NewReader(bytes.NewReader(m.encode())))
		if err != nil || again.cmd != m.cmd || !slices.Equal(again.vals, m.vals) {
			t.Errorf("%s: %q reads back as %+v, %v", name, m.encode(), again, err)
		}
	}
	for name, in := range map[string]string{
		"short length":  "     2cm",
		"long length":   "999999cmd=x;",
		"no cmd":        "    10key=value;",
		"bad key":       "    14cmd=x;k y=1;",
		"v1 bad key":    "cmd=put =x\n",
		"v1 long line":  "cmd=" + strings.Repeat("x", MaxMessage+1) + "\n",
		"v1 no command": "cmd\n",
	} {
		if m, err := readMessage(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("%s: read %+v", name, m)
		}
	}
}

// v2 frames body on the PMI-2 wire.
func v2(body string) string { return fmt.Sprintf("%6d", len(body)) + body }

func TestProcessMapping(t *testing.T) {
	for nodes, want := range map[string]string{
		"0,0,1,1": "(vector,(0,1,2),(1,1,2))",
		"0,1,0,1": "(vector,(0,1,1),(1,1,1),(0,1,1),(1,1,1))",
		"0":       "(vector,(0,1,1))",
	} {
		var of []int
		for _, f := range strings.Split(nodes, ",") {
			var n int
			fmt.Sscan(f, &n)
			of = append(of, n)
		}
		if got := ProcessMapping(of); got != want {
			t.Errorf("ProcessMapping(%s) = %s, want %s", nodes, got, want)
		}
	}
}

// client is a test's PMI-2 client on one connection.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) do(m *message) *message {
	c.t.Helper()
	if _, err := c.c.Write(m.encode()); err != nil {
		c.t.Fatal(err)
	}
	r, err := readMessage(c.r)
	if err != nil {
		c.t.Fatalf("reply to %s: %v", m.cmd, err)
	}
	return r
}

// TestServerPMI2 runs two ranks through PMI-2's exchange by hand: init,
// fullinit, put, fence (which holds the first until the second comes),
// get each other's value, node attributes and the process mapping.
func TestServerPMI2(t *testing.T) {
	s := NewServer("7.0", []int{0, 1})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go s.Serve(ln)
	defer s.Close()
	cs := []*client{dial(t, ln.Addr().String()), dial(t, ln.Addr().String())}
	for rank, c := range cs {
		if r := c.do(&message{cmd: "init", keys: []string{"pmi_version", "pmi_subversion"}, vals: []string{"2", "0"}}); r.cmd != "response_to_init" || r.v2 {
			t.Fatalf("init: %+v", r)
		}
		r := c.do((&message{cmd: "fullinit", v2: true}).add("pmirank", fmt.Sprint(rank)).add("thrid", "0x1"))
		if v, _ := r.get("rank"); v != fmt.Sprint(rank) || r.cmd != "fullinit-response" {
			t.Fatalf("fullinit: %+v", r)
		}
		if v, _ := r.get("size"); v != "2" {
			t.Errorf("size %q", v)
		}
		if v, _ := r.get("thrid"); v != "0x1" {
			t.Errorf("thrid %q not echoed", v)
		}
		c.do((&message{cmd: "kvs-put", v2: true}).add("key", fmt.Sprintf("card-%d", rank)).add("value", fmt.Sprintf("addr%d", rank)))
	}
	done := make(chan *message)
	go func() { done <- cs[0].do(&message{cmd: "kvs-fence", v2: true}) }()
	select {
	case <-done:
		t.Fatal("a fence let rank 0 through before rank 1 came")
	case <-time.After(100 * time.Millisecond):
	}
	cs[1].do(&message{cmd: "kvs-fence", v2: true})
	if r := <-done; r.cmd != "kvs-fence-response" {
		t.Fatalf("fence: %+v", r)
	}
	r := cs[0].do((&message{cmd: "kvs-get", v2: true}).add("key", "card-1"))
	if v, _ := r.get("value"); v != "addr1" {
		t.Errorf("kvs-get: %+v", r)
	}
	r = cs[1].do((&message{cmd: "info-getjobattr", v2: true}).add("key", "PMI_process_mapping"))
	if v, _ := r.get("value"); v != "(vector,(0,1,1),(1,1,1))" {
		t.Errorf("process mapping: %+v", r)
	}
	cs[0].do((&message{cmd: "info-putnodeattr", v2: true}).add("key", "shm").add("value", "x"))
	r = cs[1].do((&message{cmd: "info-getnodeattr", v2: true}).add("key", "shm"))
	if v, _ := r.get("found"); v != "FALSE" {
		t.Errorf("rank 1, on another node, found node 0's attribute: %+v", r)
	}
	if r := cs[0].do(&message{cmd: "finalize", v2: true}); r.cmd != "finalize-response" {
		t.Errorf("finalize: %+v", r)
	}
}

// TestServerAbort checks that a rank's abort releases a rank waiting at a
// fence with an error, and says why.
func TestServerAbort(t *testing.T) {
	s := NewServer("8.0", []int{0, 0})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go s.Serve(ln)
	a, b := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
	done := make(chan *message)
	go func() { done <- a.do(&message{cmd: "kvs-fence", v2: true}) }()
	time.Sleep(50 * time.Millisecond)
	b.c.Write((&message{cmd: "abort", v2: true}).add("message", "oops").encode())
	if r := <-done; r.cmd != "kvs-fence-response" || func() string { v, _ := r.get("rc"); return v }() != "-1" {
		t.Errorf("the waiting rank got %+v", r)
	}
	<-s.Aborted()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("Err = %v", err)
	}
}

// TestMPICHHello runs an MPI program built with the host's MPICH against
// the server, as srun's tasks would: four ranks on two "nodes", each told
// where the server is and who it is; every rank reports its rank and the
// size after a barrier. (Debian's MPICH 4.0 speaks the PMI-1 wire whatever
// MPIR_CVAR_PMI_VERSION says: its libmpich holds no PMI-2 client.
// TestServerPMI2 drives the PMI-2 wire.)
func TestMPICHHello(t *testing.T) {
	hello := buildHello(t)
	s := NewServer("9.0", []int{0, 0, 1, 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go s.Serve(ln)
	defer s.Close()
	var wg sync.WaitGroup
	outs := make([]string, s.Size())
	errs := make([]error, s.Size())
	for rank := range s.Size() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(hello)
			cmd.Env = append(os.Environ(), s.TaskEnv(ln.Addr().String(), rank)...)
			out, err := cmd.CombinedOutput()
			outs[rank], errs[rank] = string(out), err
		}()
	}
	wg.Wait()
	for rank := range s.Size() {
		if want := fmt.Sprintf("rank %d of 4 on ", rank); errs[rank] != nil || !strings.Contains(outs[rank], want) {
			t.Errorf("rank %d: %v: %q, want %q", rank, errs[rank], outs[rank], want)
		}
	}
}

// buildHello compiles an MPI hello world with mpicc; the test is skipped
// without MPICH (scripts/install-deps.sh installs it).
func buildHello(t *testing.T) string {
	t.Helper()
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc is not installed (scripts/install-deps.sh installs MPICH)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.c")
	if err := os.WriteFile(src, []byte(HelloSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	if out, err := exec.Command(mpicc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v: %s", err, out)
	}
	return bin
}
