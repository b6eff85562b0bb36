package ident

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestLookup(t *testing.T) {
	root, err := Lookup("root")
	if err != nil || root.UID != 0 || root.GID != 0 || !root.IsRoot() || root.Home == "" {
		t.Fatalf("Lookup(root) = %+v, %v", root, err)
	}
	if _, err := Lookup("no-such-user-corral"); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("Lookup of a missing user: %v, want ErrUnknownUser", err)
	}
}

func TestLookupID(t *testing.T) {
	root, err := LookupID(0)
	if err != nil || root.Name != "root" || root.GID != 0 {
		t.Fatalf("LookupID(0) = %+v, %v; want root", root, err)
	}
	// 4294967294 is (uint32)-2, which no passwd entry uses.
	if _, err := LookupID(4294967294); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("LookupID of a uid without an entry: %v, want ErrUnknownUser", err)
	}
}

// TestDoActsAsTheUser checks, as root, that Do's function is refused what
// the user may not touch and that what it creates belongs to the user,
// while the rest of the process stays root.
func TestDoActsAsTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch credentials")
	}
	nobody, err := Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is 0700
	os.Chown(open, int(nobody.UID), int(nobody.GID))
	err = nobody.Do(func() error {
		_, err := os.ReadFile(secret)
		return err
	})
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("nobody read a root-only file: %v", err)
	}
	created := filepath.Join(open, "made")
	if err := nobody.Do(func() error { return os.WriteFile(created, nil, 0o644) }); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(created, &st); err != nil || st.Uid != nobody.UID || st.Gid != nobody.GID {
		t.Errorf("file created as nobody is owned by %d:%d, want %d:%d", st.Uid, st.Gid, nobody.UID, nobody.GID)
	}
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("root lost access after Do: %v", err)
	}
}
