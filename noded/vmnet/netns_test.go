package vmnet

import (
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
}

// TestNamespaceConfinesItsListener creates a namespace with a tap device,
// listens on the tap's address inside it, and checks that the listener
// answers from inside the namespace and cannot be reached from the node's
// own namespace, and that a namespace opened again by path is the same one.
func TestNamespaceConfinesItsListener(t *testing.T) {
	needRoot(t)
	path := filepath.Join(t.TempDir(), "netns")
	ns, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Remove()
	tap, err := ns.Tap("tap0", net.HardwareAddr{0x52, 0x54, 0, 0xc0, 0x44, 2}, netip.MustParsePrefix("10.0.2.2/24"), 65520)
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	l, err := ns.Listen("10.0.2.2:2049")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	err = again.Do(func() error {
		c, err := net.DialTimeout("tcp", "10.0.2.2:2049", 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err = io.ReadAll(c)
		return err
	})
	if err != nil || string(got) != "hi" {
		t.Fatalf("inside the namespace: %q, %v", got, err)
	}
	// From the node's own namespace the address is not the tap's: the
	// dial fails, or reaches whatever the node's network has there, but
	// never the listener.
	c, err := net.DialTimeout("tcp", "10.0.2.2:2049", 500*time.Millisecond)
	if err == nil {
		c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) == "hi" {
			t.Fatal("the namespace's listener answered from the node's own namespace")
		}
	}
}

// TestOpenRefusesAPlainFile checks that a namespace file whose bind mount
// is gone is not taken for a namespace.
func TestOpenRefusesAPlainFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netns")
	os.WriteFile(path, nil, 0o600)
	if _, err := Open(path); err == nil {
		t.Fatal("Open accepted a plain file")
	}
}
