package vmrun

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDialWaitsForTheListen binds a Unix socket and listens on it only
// 100 ms later, as virtiofsd does: a plain dial in that gap is refused,
// dialWhenListening connects once the server listens, and it gives up with
// the refusal when nothing ever listens.
func TestDialWaitsForTheListen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if _, err := dialSocket(path); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial before the listen: %v, want connection refused", err)
	}
	if _, err := dialWhenListening(path, 50*time.Millisecond); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial that gives up: %v, want connection refused", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		syscall.Listen(fd, 1)
	}()
	f, err := dialWhenListening(path, 10*time.Second)
	if err != nil {
		t.Fatalf("a dial that waits for the listen: %v", err)
	}
	f.Close()
}
