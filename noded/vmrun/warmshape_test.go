package vmrun

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/ident"
	"corral/internal/procref"
	"corral/noded"
	"corral/vmimage"
)

// loadedRunner is a runner of the built image that boots nothing: what
// shapes and the snapshot pool need. Its accelerator is tcg, as a probe
// here would say.
func loadedRunner(t *testing.T, warmDir string) *Runner {
	t.Helper()
	if _, err := vmimage.Load(filepath.Join(imageRoot(), "default")); err != nil {
		t.Skipf("no guest image (run make image, or set CORRAL_IMAGE_ROOT): %v", err)
	}
	r, err := Load(Config{ImageRoot: imageRoot(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WarmDir: warmDir})
	if err != nil {
		t.Skipf("no vm runner here: %v", err)
	}
	return r
}

// TestWarmShapes checks which jobs share a snapshot: those whose VMs have
// the same device model and guest preparation, whatever their script,
// user, environment, shares or output paths; and which jobs start cold,
// saying why.
func TestWarmShapes(t *testing.T) {
	r := loadedRunner(t, "")
	base := func() noded.LaunchSpec {
		return noded.LaunchSpec{Job: &api.Job{ID: 1, Node: "n1", CPUs: 1, MemMB: 256}, Dir: "/var/lib/corral/jobs/1",
			Script: "#!/bin/bash\necho hi\n", Env: []string{"A=1"}, Stdout: "/home/u/slurm-1.out", WorkDir: "/home/u",
			User: ident.User{Name: "u", UID: 1000, GID: 1000}, Shares: []string{"/home/u"}}
	}
	key := func(edit func(*noded.LaunchSpec)) string {
		spec := base()
		edit(&spec)
		sh, why := r.warmShapeOf(spec, "tcg")
		if sh == nil {
			t.Fatalf("no shape: %s", why)
		}
		return sh.key
	}
	same := map[string]func(*noded.LaunchSpec){
		"another job":       func(s *noded.LaunchSpec) { s.Job.ID, s.Dir = 2, "/var/lib/corral/jobs/2" },
		"another script":    func(s *noded.LaunchSpec) { s.Script, s.Args, s.Env = "#!/bin/sh\ntrue\n", []string{"x"}, nil },
		"another user":      func(s *noded.LaunchSpec) { s.User = ident.User{Name: "v", UID: 1001, GID: 100} },
		"other shares":      func(s *noded.LaunchSpec) { s.Shares, s.WorkDir = []string{"/scratch", "/home/v"}, "/scratch" },
		"another output":    func(s *noded.LaunchSpec) { s.Stdout = "/scratch/out" },
		"the job's CPU set": func(s *noded.LaunchSpec) { s.Job.Placement = &api.Placement{CPUs: []int{3}} },
	}
	other := map[string]func(*noded.LaunchSpec){
		"two vCPUs":            func(s *noded.LaunchSpec) { s.Job.CPUs = 2 },
		"more memory":          func(s *noded.LaunchSpec) { s.Job.MemMB = 512 },
		"stderr apart":         func(s *noded.LaunchSpec) { s.Stderr = "/home/u/err" },
		"no output":            func(s *noded.LaunchSpec) { s.Stdout = os.DevNull },
		"a partition's root":   func(s *noded.LaunchSpec) { s.Root = "/srv/roots/el9" },
		"a way out":            func(s *noded.LaunchSpec) { s.Network = api.NetworkNode },
		"bound to a NUMA node": func(s *noded.LaunchSpec) { s.Job.Placement = &api.Placement{CPUs: []int{0}, NUMANodes: []int{0}} },
		"another node name":    func(s *noded.LaunchSpec) { s.Job.Node = "n2" },
	}
	k0 := key(func(*noded.LaunchSpec) {})
	for name, edit := range same {
		if k := key(edit); k != k0 {
			t.Errorf("%s: another snapshot (%s, not %s)", name, k, k0)
		}
	}
	seen := map[string]string{k0: "the base"}
	for name, edit := range other {
		k := key(edit)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s: the same snapshot as %s", name, prev)
		}
		seen[k] = name
	}
	if sh, _ := r.warmShapeOf(withNetwork(base(), api.NetworkNode), "tcg"); sh.stage != vmimage.WarmNet {
		t.Errorf("a guest with a way out is prepared to stage %s, want %s (no connection before its snapshot)", sh.stage, vmimage.WarmNet)
	}
	cold := map[string]struct {
		edit func(*noded.LaunchSpec)
		why  string
	}{
		"--no-warm":     {func(s *noded.LaunchSpec) { s.NoWarm = true }, "--no-warm"},
		"virtiofs":      {func(s *noded.LaunchSpec) { s.Share = vmimage.ShareVirtiofs }, "virtiofs"},
		"unknown image": {func(s *noded.LaunchSpec) { s.Job.Spec.Image = "nope" }, "unknown guest image"},
	}
	for name, tc := range cold {
		spec := base()
		tc.edit(&spec)
		if sh, why := r.warmShapeOf(spec, "tcg"); sh != nil || !strings.Contains(why, tc.why) {
			t.Errorf("%s: shape %v, why %q; want none, saying %q", name, sh, why, tc.why)
		}
	}
}

func withNetwork(s noded.LaunchSpec, n string) noded.LaunchSpec { s.Network = n; return s }

func TestKeyArgv(t *testing.T) {
	argv := []string{"qemu", "-name", "guest=corral:/d,debug-threads=on", "-m", "256", "-append", "console=ttyS0 corral.warm=root init_on_free=1 init_on_alloc=0 corral.agent=1"}
	want := []string{"qemu", "-m", "256", "-append", "console=ttyS0 corral.agent=1"}
	if got := keyArgv(argv); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("keyArgv = %q, want %q", got, want)
	}
}

// writeFakeSnap records a snapshot of key in the pool's directory: a
// stream file of size bytes and its record, as made for image img.
func writeFakeSnap(t *testing.T, r *Runner, dir, key string, size int, created time.Time) {
	t.Helper()
	img, _ := r.image("")
	contents, err := r.contentKeys(img)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, key+snapStateExt)
	if err := os.WriteFile(state, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, _ := fileSHA256(state)
	fi, _ := os.Stat(state)
	s := warmSnap{Key: key, Shape: "fake", Image: img.Name, Contents: contents, Size: fi.Size(), ModTimeNano: fi.ModTime().UnixNano(),
		SHA256: sum, Created: created}
	if err := procref.WriteJSON(filepath.Join(dir, key+snapMetaExt), s); err != nil {
		t.Fatal(err)
	}
}

// TestWarmPoolKeepsWhatIsSound opens a warm directory holding a sound
// snapshot, one whose stream changed, one of another image's contents, a
// stream without its record, a partial stream and the state directory of
// an interrupted snapshot: only the sound one is kept, and the rest is
// removed. verify then drops a stream damaged in place (same size and
// time), and the pool keeps within its bounds, dropping the least
// recently used.
func TestWarmPoolKeepsWhatIsSound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "warm")
	os.Mkdir(dir, 0o700)
	r := loadedRunner(t, "")
	now := time.Now()
	writeFakeSnap(t, r, dir, "sound", 1000, now)
	writeFakeSnap(t, r, dir, "changed", 1000, now)
	os.WriteFile(filepath.Join(dir, "changed"+snapStateExt), make([]byte, 999), 0o600)
	writeFakeSnap(t, r, dir, "stale", 1000, now)
	var stale warmSnap
	procref.ReadJSON(filepath.Join(dir, "stale"+snapMetaExt), &stale)
	stale.Contents = "an older kernel"
	procref.WriteJSON(filepath.Join(dir, "stale"+snapMetaExt), stale)
	os.WriteFile(filepath.Join(dir, "orphan"+snapStateExt), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "partial"+snapStateExt+snapTmpExt), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "interrupted"+snapBootExt), 0o700)

	p, err := newWarmPool(r, dir, 2, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := "sound.json sound.state"; strings.Join(names, " ") != want || len(p.snaps) != 1 {
		t.Errorf("the warm directory holds %v and the pool %d snapshots; want %s", names, len(p.snaps), want)
	}

	// Damaged in place: the same size and time, other bytes.
	path := p.statePath("sound")
	fi, _ := os.Stat(path)
	os.WriteFile(path, append([]byte{1}, make([]byte, 999)...), 0o600)
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	if p.check(p.snaps["sound"]) != nil {
		t.Fatal("the cheap check should not see a change of bytes alone")
	}
	p.verify()
	if len(p.snaps) != 0 {
		t.Errorf("verify kept a damaged snapshot")
	}

	for i, key := range []string{"a", "b", "c"} {
		writeFakeSnap(t, r, dir, key, 1000, now.Add(time.Duration(i-3)*time.Minute))
		p.load(key)
	}
	p.get("a") // a is used: b is the least recently used
	p.evict()
	if p.get("b") != nil || p.get("a") == nil || p.get("c") == nil {
		t.Errorf("after eviction the pool holds %v, want a and c", p.snaps)
	}
	if _, err := os.Stat(p.statePath("b")); err == nil {
		t.Error("the evicted snapshot's stream is still there")
	}
	p.maxBytes = 1500
	p.evict()
	if len(p.snaps) != 1 {
		t.Errorf("over the byte bound the pool holds %d snapshots, want 1", len(p.snaps))
	}
}
