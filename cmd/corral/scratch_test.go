//go:build !corral_client

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestScratchMB: the scratch space a node daemon offers to sbatch --tmp is
// --tmp when given, else the size of --tmp-dir's file system; a bad value
// names the flag.
func TestScratchMB(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if got, err := scratchMB(dir, ""); err != nil || got != int64(st.Blocks)*st.Bsize>>20 || got <= 0 {
		t.Errorf("scratchMB(%s) = %d, %v; want the file system's %d MiB", dir, got, err, int64(st.Blocks)*st.Bsize>>20)
	}
	if got, err := scratchMB(dir, "100G"); err != nil || got != 100<<10 {
		t.Errorf("--tmp 100G = %d, %v; want 102400", got, err)
	}
	if _, err := scratchMB("", "4X"); err == nil || err.Error() != `--tmp=4X: unknown unit "X" (use K, M, G or T)` {
		t.Errorf("--tmp lots: %v; want an error naming --tmp", err)
	}
	if _, err := scratchMB(filepath.Join(dir, "gone"), ""); err == nil || !strings.Contains(err.Error(), "--tmp-dir "+dir) {
		t.Errorf("a missing --tmp-dir: %v; want an error naming it", err)
	}
}
