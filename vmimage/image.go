package vmimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// MetadataFile is the name of an image's description inside its directory.
const MetadataFile = "image.json"

// buildHint ends the errors about missing or broken images.
const buildHint = `run "make image" to build the default image`

// Image is a guest image: a kernel and a base initramfs whose /init speaks
// the protocol of this package.
type Image struct {
	// Name is the image's name as jobs request it (--image NAME).
	Name string
	// Dir is the absolute directory that holds the image.
	Dir string
	// Kernel and Initrd are absolute paths of the kernel (for -kernel) and
	// of the base initramfs (the first part of -initrd).
	Kernel string
	Initrd string
	// KernelVersion is what `uname -r` prints in the guest.
	KernelVersion string
	// PVH says whether Kernel is an uncompressed ELF with a PVH entry
	// (booted directly by -M microvm) rather than a bzImage.
	PVH bool
	// HostRoot says the image's init can give a job the host's tree as its
	// root and its shared paths (Payload.FS): the image carries the kernel
	// modules for virtio, virtiofs, NFS and overlay. Images built before
	// protocol 2 cannot.
	HostRoot bool
	// Agent says the image's init runs the guest agent on the
	// vmimage.AgentPortName port when the kernel command line has
	// corral.agent=1 (protocol 3).
	Agent bool
	// Warm says the image's init can be booted for a warm start's
	// snapshot (corral.warm=STAGE) and take its job over the agent
	// (FrameJob; protocol 4).
	Warm bool
}

// metadata is the JSON form of image.json, as scripts/build-image.sh writes
// it. Fields this package does not use (kernel_package_version, busybox,
// kernel_format, protocol) are informational.
type metadata struct {
	Name          string `json:"name"`
	Kernel        string `json:"kernel"`
	Initrd        string `json:"initrd"`
	KernelVersion string `json:"kernel_version"`
	PVH           bool   `json:"pvh"`
	HostRoot      bool   `json:"host_root"`
	Protocol      int    `json:"protocol"`
}

// Protocol is the version of the host–guest protocol this package speaks.
// An image.json with a larger "protocol" was built for a newer corral.
// Protocol 2 added job/user and job/fs (Payload.User and Payload.FS);
// protocol 3 the guest agent; protocol 4 warm starts.
const Protocol = 4

// Load reads the image in dir. Its errors name the file at fault and say how
// to fix it; a missing image wraps fs.ErrNotExist.
func Load(dir string) (*Image, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dir, err)
	}
	file := filepath.Join(abs, MetadataFile)
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no guest image in %s (%s is missing): %s: %w", abs, MetadataFile, buildHint, err)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", file, err)
	}
	var m metadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("image %s: not valid JSON (%v): %s again", file, err, buildHint)
	}
	if m.Kernel == "" || m.Initrd == "" {
		return nil, fmt.Errorf("image %s: \"kernel\" and \"initrd\" must both be set: %s again", file, buildHint)
	}
	if m.Protocol > Protocol {
		return nil, fmt.Errorf("image %s: built for guest protocol %d, this corral speaks %d: upgrade corral or rebuild the image with this one's make image", file, m.Protocol, Protocol)
	}
	img := &Image{
		Name:          m.Name,
		Dir:           abs,
		Kernel:        filepath.Join(abs, m.Kernel),
		Initrd:        filepath.Join(abs, m.Initrd),
		KernelVersion: m.KernelVersion,
		PVH:           m.PVH,
		HostRoot:      m.HostRoot && m.Protocol >= 2,
		Agent:         m.Protocol >= 3,
		Warm:          m.Protocol >= 4,
	}
	if img.Name == "" {
		img.Name = filepath.Base(abs)
	}
	for _, f := range []string{img.Kernel, img.Initrd} {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("image %s: %s names %s, which cannot be read: %s again: %w", img.Name, file, filepath.Base(f), buildHint, err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("image %s: %s is not a regular file: %s again", img.Name, f, buildHint)
		}
	}
	return img, nil
}

// List loads every image in the subdirectories of root that hold an
// image.json, sorted by name. Subdirectories without one are skipped. A
// broken image does not hide the others: List returns the images it could
// load together with an error joining what was wrong with the rest.
func List(root string) ([]Image, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no guest images: %s does not exist: %s: %w", root, buildHint, err)
	}
	if err != nil {
		return nil, fmt.Errorf("list images in %s: %w", root, err)
	}
	var imgs []Image
	var errs []error
	seen := map[string]string{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, MetadataFile)); err != nil {
			continue
		}
		img, err := Load(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := seen[img.Name]; dup {
			errs = append(errs, fmt.Errorf("image name %q is used by both %s and %s: rename one in its %s", img.Name, other, img.Dir, MetadataFile))
			continue
		}
		seen[img.Name] = img.Dir
		imgs = append(imgs, *img)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Name < imgs[j].Name })
	return imgs, errors.Join(errs...)
}

// WriteInitrd writes the file to pass to QEMU's -initrd: the image's base
// initramfs, zero bytes up to the next 4-byte boundary (the kernel skips
// them, and reads an uncompressed archive only at such a boundary), then p's
// payload.
func (img *Image) WriteInitrd(w io.Writer, p Payload) error {
	if err := p.Validate(); err != nil {
		return err
	}
	f, err := os.Open(img.Initrd)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return fmt.Errorf("image %s: copy %s: %w", img.Name, img.Initrd, err)
	}
	if pad := (4 - n%4) % 4; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return fmt.Errorf("image %s: write initrd: %w", img.Name, err)
		}
	}
	return WritePayload(w, p)
}
