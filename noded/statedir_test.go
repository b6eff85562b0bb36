package noded

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func testRunDirs(t *testing.T, max int, idle time.Duration) *runDirs {
	t.Helper()
	root := filepath.Join(t.TempDir(), "jobs")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	s := newRunDirs(root, max, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.idle = idle
	t.Cleanup(s.close)
	return s
}

// waitSpares waits until s holds n spares, emptied in the background.
func waitSpares(t *testing.T, s *runDirs, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.spares)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spares, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestRunDirsReuse checks that a retired directory is handed to the next run
// with its files (and so their inodes) kept but emptied, its record
// rewritten whole, and anything but a regular file removed without being
// followed.
func TestRunDirsReuse(t *testing.T) {
	s := testRunDirs(t, 4, time.Minute)
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep me\n"), 0o600)

	d1, err := s.create(jobKey{1, 1}, []byte(`{"a long record of the first run"}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d1, "exit"), []byte("7\n"), 0o600)
	os.Mkdir(filepath.Join(d1, "sub"), 0o700)
	os.WriteFile(filepath.Join(d1, "sub", "x"), []byte("x"), 0o600)
	os.Symlink(outside, filepath.Join(d1, "link"))
	dirIno, exitIno := inode(t, d1), inode(t, filepath.Join(d1, "exit"))

	if err := s.retire(jobKey{1, 1}); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, s, 1)
	if got := dirNames(t, s.root); !slices.Equal(got, []string{".1-1"}) {
		t.Fatalf("after retire the jobs directory holds %v, want the spare .1-1", got)
	}
	d2, err := s.create(jobKey{2, 5}, []byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, s.root); !slices.Equal(got, []string{"2-5"}) {
		t.Fatalf("jobs directory holds %v, want only 2-5", got)
	}
	if inode(t, d2) != dirIno || inode(t, filepath.Join(d2, "exit")) != exitIno {
		t.Error("the spare's directory or files were not reused")
	}
	checkFile(t, filepath.Join(d2, recordFile), "{}\n")
	checkFile(t, filepath.Join(d2, "exit"), "")
	if got := dirNames(t, d2); !slices.Equal(got, []string{"exit", recordFile}) {
		t.Errorf("reused directory holds %v", got)
	}
	checkFile(t, outside, "keep me\n")
}

func TestRunDirsSparesExpire(t *testing.T) {
	s := testRunDirs(t, 4, 50*time.Millisecond)
	for id := uint64(1); id <= 2; id++ {
		if _, err := s.create(jobKey{id, 1}, []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	s.retire(jobKey{1, 1})
	s.retire(jobKey{2, 1})
	waitSpares(t, s, 2)
	deadline := time.Now().Add(5 * time.Second)
	for len(dirNames(t, s.root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spares %v not removed after their idle time", dirNames(t, s.root))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunDirsBounded checks that spares beyond the limit, and every
// directory retired after close, are removed.
func TestRunDirsBounded(t *testing.T) {
	s := testRunDirs(t, 1, time.Minute)
	for id := uint64(1); id <= 3; id++ {
		if _, err := s.create(jobKey{id, 1}, []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	s.retire(jobKey{1, 1})
	s.retire(jobKey{2, 1})
	s.retire(jobKey{9, 9}) // never created: nothing to do
	s.close()
	s.retire(jobKey{3, 1})
	if got := dirNames(t, s.root); len(got) != 0 {
		t.Errorf("jobs directory holds %v after close", got)
	}
	if _, err := s.create(jobKey{4, 1}, []byte("{}\n")); err != nil {
		t.Errorf("create after close: %v", err)
	}
}

// TestEmptyDirWaitsForForks checks that a spare's files are not opened for
// writing while a process is being forked: the child would hold the
// descriptor until it execs, and the next run's script would fail to execute
// with ETXTBSY (exit code 126), as about one in 40,000 trivial jobs of the
// e2e benchmark did before emptyDir took the lock.
func TestEmptyDirWaitsForForks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, scriptFile), []byte("#!/bin/sh\ntrue\n"), 0o700)
	syscall.ForkLock.Lock() // as a fork under way holds it
	done := make(chan error, 1)
	go func() { done <- emptyDir(dir, recordFile) }()
	select {
	case err := <-done:
		syscall.ForkLock.Unlock()
		t.Fatalf("emptyDir ran during a fork (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	checkFile(t, filepath.Join(dir, scriptFile), "#!/bin/sh\ntrue\n")
	syscall.ForkLock.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, scriptFile), "")
}
