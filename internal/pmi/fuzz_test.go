package pmi

import (
	"bufio"
	"bytes"
	"net"
	"slices"
	"testing"
	"time"
)

// FuzzReadMessage reads any bytes as PMI messages: it never panics, and a
// message it reads reads back the same once encoded.
func FuzzReadMessage(f *testing.F) {
	for _, s := range []string{"cmd=put kvsname=1 key=a value=b\n", v2("cmd=kvs-get;key=a;"), "    -1cmd=", "cmd=get key=a\\ b\n", "mcmd=spawn\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for range 8 {
			m, err := readMessage(r)
			if err != nil {
				return
			}
			again, err := readMessage(bufio.NewReader(bytes.NewReader(m.encode())))
			if err != nil {
				t.Fatalf("%q encodes to %q, which does not read: %v", b, m.encode(), err)
			}
			if again.cmd != m.cmd || !slices.Equal(again.keys, m.keys) {
				t.Fatalf("%q reads back as %+v, was %+v", m.encode(), again, m)
			}
		}
	})
}

// FuzzServe feeds any bytes to a one-rank server's connection: it answers
// or hangs up, and never panics or blocks for ever.
func FuzzServe(f *testing.F) {
	f.Add([]byte("cmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in\ncmd=put kvsname=x key=k value=v\ncmd=get kvsname=x key=k\n"))
	f.Add([]byte(v2("cmd=fullinit;pmirank=0;") + v2("cmd=kvs-fence;") + v2("cmd=info-getnodeattr;key=x;wait=FALSE;")))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewServer("1.0", []int{0})
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() { s.serveConn(server); close(done) }()
		go func() {
			client.Write(b)
			client.Close()
		}()
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := client.Read(buf); err != nil {
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.Close()
			t.Fatalf("the server did not finish with %q", b)
		}
	})
}
