package vmrun

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"corral/api"
	"corral/noded"
	"corral/vmimage"
)

// warmFormat is the version of what a snapshot is made of on this side:
// the guest's preparation and the restore's steps. A change to either
// makes every snapshot of an earlier version unusable; it is part of the
// key.
const warmFormat = 1

// warmShape is what a warm start's snapshot is of, for a job: the VM's
// device model (its QEMU command line), the image, QEMU and how far the
// guest was prepared. Jobs of one shape restore from one snapshot.
type warmShape struct {
	// key names the snapshot: a hash of everything below and of the
	// contents of the image's kernel and initramfs and of QEMU's binary,
	// so that a changed one is another shape.
	key string
	// stage is how far the snapshot's guest went (vmimage.WarmNet or
	// vmimage.WarmRoot).
	stage string
	img   *vmimage.Image
	// tmpl is the job the snapshot's VM is started as: the job's shape
	// (vCPUs, memory, placement's NUMA nodes and hugepages, outputs,
	// share, root, network) and nothing of the job itself.
	tmpl noded.LaunchSpec
	// desc says the shape in a log line.
	desc string
}

// warmShapeOf returns the shape of spec's VM, or why it cannot start warm:
// the job or its partition said no, its image predates warm starts, or its
// VM cannot be migrated (virtiofs, devices passed through), which a
// snapshot is.
func (r *Runner) warmShapeOf(spec noded.LaunchSpec, accel string) (*warmShape, string) {
	job := spec.Job
	if job == nil {
		job = &api.Job{}
	}
	img, err := r.image(job.Spec.Image)
	switch {
	case err != nil:
		return nil, err.Error()
	case spec.NoWarm:
		return nil, "the job or its partition asked for a cold boot (--no-warm, Warm=no)"
	case !img.Warm || !img.HostRoot:
		return nil, fmt.Sprintf("image %s was built before warm starts (rebuild it with make image)", img.Name)
	case shareKind(spec) != vmimage.ShareNFS:
		return nil, "its share is virtiofs, which QEMU cannot save"
	case len(r.passthroughAddrs(job.Placement)) > 0:
		return nil, "devices passed through to it (vfio) cannot be saved"
	case job.Net != nil:
		// A snapshot's device model has no card on a job's network.
		return nil, "it is on its multi-node job's private network, whose card no snapshot has"
	}
	cpus, memMB, err := vmShape(job)
	if err != nil {
		return nil, err.Error()
	}
	var place *api.Placement
	if p := job.Placement; p != nil && (len(p.NUMANodes) > 0 || len(p.Hugepages) > 0) {
		// What of the placement is in the device model: the memory
		// backend. Its CPUs are the job's, not the snapshot's.
		place = &api.Placement{NUMANodes: p.NUMANodes, Hugepages: p.Hugepages}
	}
	stage := vmimage.WarmRoot
	if spec.Network == api.NetworkNode {
		// A guest with a way out must draw its network stack's secrets
		// after it was restored: no connection before the snapshot.
		stage = vmimage.WarmNet
	}
	if r.warmStage != "" {
		stage = r.warmStage
	}
	out := planOutputs(spec.Stdout, spec.Stderr)
	tmpl := noded.LaunchSpec{
		Job: &api.Job{Node: job.Node, CPUs: cpus, MemMB: memMB, Placement: place,
			Spec: api.JobSpec{Image: img.Name, NUMA: job.Spec.NUMA}},
		Share: vmimage.ShareNFS, Root: spec.Root, Network: spec.Network,
	}
	if out.stdout != "" {
		tmpl.Stdout = "stdout"
	}
	if out.stderr != "" {
		tmpl.Stderr = "stderr"
	}
	a := vmArgs{img: img, accel: accel, cpus: cpus, memMB: memMB, f: filesIn("/"), out: planOutputs(tmpl.Stdout, tmpl.Stderr),
		node: job.Node, placement: place, numa: job.Spec.NUMA, net: &guestNet{}, agent: true}
	keys, err := r.contentKeys(img)
	if err != nil {
		return nil, "cannot read what the snapshot depends on: " + err.Error()
	}
	return &warmShape{key: shapeKey(stage, spec.Root, keys, r.argv(a)), stage: stage, img: img, tmpl: tmpl,
		desc: fmt.Sprintf("image %s, %d vCPUs, %d MiB, share nfs %s, network %s, stage %s", img.Name, cpus, memMB, orDefault(spec.Root, "/"), orDefault(spec.Network, api.NetworkNone), stage)}, ""
}

// shapeKey is a snapshot's key: a hash of how far its guest goes, the
// root it mounts, the contents it was made from (contentKeys) and its
// QEMU command line (keyArgv).
func shapeKey(stage, root, contents string, argv []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "corral warm %d\nstage %s\nroot %s\n%s\n", warmFormat, stage, root, contents)
	for _, arg := range keyArgv(argv) {
		fmt.Fprintf(h, "%q\n", arg)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// keyArgv is a QEMU command line as a snapshot's key takes it: without
// -name, which names the VM's state directory, and without the warm stage
// on the kernel command line, which only the snapshot's own boot has.
func keyArgv(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "-name":
			i++
			continue
		case "-append":
			if i+1 < len(argv) {
				out = append(out, argv[i], dropWarmArg(argv[i+1]))
				i++
				continue
			}
		}
		out = append(out, argv[i])
	}
	return out
}

func dropWarmArg(cmdline string) string {
	f := strings.Fields(cmdline)
	out := f[:0]
	for _, a := range f {
		if !strings.HasPrefix(a, "corral.warm=") && !slices.Contains(warmZeroing, a) {
			out = append(out, a)
		}
	}
	return strings.Join(out, " ")
}

// warmZeroing has the guest of a snapshot zero the pages it frees rather
// than those it allocates (Debian's kernel zeroes on allocation by
// default): the same work, moved, so that the free memory of the saved
// guest is zero pages, which the stream does not carry. Its copies keep
// it, at the same cost to their jobs.
var warmZeroing = []string{"init_on_free=1", "init_on_alloc=0"}

// warmCmdline is what the kernel command line of a snapshot's boot has
// beyond a job's of its shape: the stage, and warmZeroing.
func warmCmdline(stage string) []string {
	if stage == "" {
		return nil
	}
	return append([]string{"corral.warm=" + stage}, warmZeroing...)
}

// contentKeys returns the hashes of what a guest's snapshot depends on
// besides its command line: the image's kernel and initramfs and QEMU's
// binary. Each file is hashed once per identity (device, inode, size,
// modification time): a file replaced or rewritten is hashed again.
func (r *Runner) contentKeys(img *vmimage.Image) (string, error) {
	var parts []string
	for _, p := range []string{img.Kernel, img.Initrd, r.cfg.QEMU} {
		h, err := r.hashes.of(p)
		if err != nil {
			return "", err
		}
		parts = append(parts, h)
	}
	return strings.Join(parts, " "), nil
}

// fileHashes caches the SHA-256 of files by their identity.
type fileHashes struct {
	mu   sync.Mutex
	seen map[string]fileHash
}

type fileHash struct {
	id  string // device, inode, size and modification time
	sum string
}

func (c *fileHashes) of(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	id := strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id += fmt.Sprintf(" %d %d %d", st.Dev, st.Ino, st.Ctim.Nano())
	}
	c.mu.Lock()
	cached, ok := c.seen[path]
	c.mu.Unlock()
	if ok && cached.id == id {
		return cached.sum, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]fileHash{}
	}
	c.seen[path] = fileHash{id: id, sum: sum}
	c.mu.Unlock()
	return sum, nil
}
