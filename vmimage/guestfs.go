package vmimage

import (
	"fmt"
	"net/netip"
	"path"
	"sort"
	"strconv"
	"strings"
)

// User is whom the guest runs the job as (job/user): a user of the host,
// with the host's ids, so that files on shared paths stay theirs.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups; may hold GID
	Home   string
}

// The kinds of transport the guest mounts the host's tree over.
const (
	// ShareVirtiofs is virtiofs: fast, but QEMU 7.2 cannot migrate a VM
	// that has a vhost-user-fs device.
	ShareVirtiofs = "virtiofs"
	// ShareNFS is NFSv3 over the VM's virtio-net device, served by the
	// node: migratable.
	ShareNFS = "nfs"
)

// FS is the job's file system (job/fs): the host's tree, reached over
// Kind, is the lower layer of the guest's root, read-only under a tmpfs
// overlay; each of Shares (absolute host paths) is mounted read-write at
// the same path.
type FS struct {
	Kind string
	// Tag is the virtiofs mount tag.
	Tag string
	// Addr and Port are the NFS server's address and port as the guest
	// reaches it (MOUNT and NFS share the port); Export is the path the
	// guest mounts, "/" for the host's root.
	Addr   string
	Port   int
	Export string
	// GuestAddr is the guest's own IPv4 address with its prefix length
	// (10.0.2.15/24); the server's address is its gateway.
	GuestAddr string
	// MTU is the guest network card's MTU; 0 keeps the driver's (1500).
	MTU int
	// Gateway, when set (a partition whose network is node), is the
	// guest's default route, on its card's subnet, and Nameservers the
	// DNS servers it writes to its own /etc/resolv.conf. Without a
	// gateway the guest has no route beyond its file server and its
	// resolv.conf is the host's.
	Gateway     string
	Nameservers []string
	Shares      []string
}

// Validate reports the first thing about fs the guest could not mount.
func (fs *FS) Validate() error {
	switch fs.Kind {
	case ShareVirtiofs:
		if fs.Tag == "" || strings.ContainsAny(fs.Tag, " \n\x00") {
			return fmt.Errorf("payload fs: virtiofs tag %q: give a tag without spaces", fs.Tag)
		}
	case ShareNFS:
		if fs.Addr == "" || fs.Port <= 0 || fs.Port > 65535 || !path.IsAbs(fs.Export) || fs.GuestAddr == "" {
			return fmt.Errorf("payload fs: nfs needs an address, a port, an absolute export and the guest's address (got %q %d %q %q)", fs.Addr, fs.Port, fs.Export, fs.GuestAddr)
		}
		if fs.MTU < 0 || fs.MTU > 65535 {
			return fmt.Errorf("payload fs: nfs mtu %d: give 0 (the driver's) up to 65535", fs.MTU)
		}
		if strings.ContainsAny(fs.Addr+fs.Export+fs.GuestAddr, " \n\x00") {
			return fmt.Errorf("payload fs: nfs address, export and guest address may not hold spaces")
		}
		if err := fs.validateRoute(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("payload fs: share kind %q: use %s or %s", fs.Kind, ShareVirtiofs, ShareNFS)
	}
	if fs.Kind != ShareNFS && (fs.Gateway != "" || len(fs.Nameservers) > 0) {
		return fmt.Errorf("payload fs: a gateway and nameservers need the nfs share's card")
	}
	for _, p := range fs.Shares {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsAny(p, "\n\x00") {
			return fmt.Errorf("payload fs: shared path %q: give a clean absolute path other than / without newlines", p)
		}
	}
	return nil
}

// SameShare reports whether o reaches the host's tree the same way as fs:
// the same kind, tag, server, export and guest address and MTU. Shared
// paths and the way out may differ: they are each job's (a warm start's
// guest was prepared with a share without them).
func (fs *FS) SameShare(o *FS) bool {
	return fs != nil && o != nil && fs.Kind == o.Kind && fs.Tag == o.Tag && fs.Addr == o.Addr && fs.Port == o.Port &&
		fs.Export == o.Export && fs.GuestAddr == o.GuestAddr && fs.MTU == o.MTU
}

// validateRoute checks the gateway (on the guest's subnet) and the
// nameservers (IPv4 addresses, only with a gateway).
func (fs *FS) validateRoute() error {
	if fs.Gateway == "" {
		if len(fs.Nameservers) > 0 {
			return fmt.Errorf("payload fs: nameservers without a gateway: the guest could not reach them")
		}
		return nil
	}
	own, err1 := netip.ParsePrefix(fs.GuestAddr)
	gw, err2 := netip.ParseAddr(fs.Gateway)
	if err1 != nil || err2 != nil || !gw.Is4() || !own.Masked().Contains(gw) {
		return fmt.Errorf("payload fs: gateway %q: give an IPv4 address on the guest's subnet %s", fs.Gateway, fs.GuestAddr)
	}
	for _, ns := range fs.Nameservers {
		if a, err := netip.ParseAddr(ns); err != nil || !a.Is4() {
			return fmt.Errorf("payload fs: nameserver %q: give an IPv4 address", ns)
		}
	}
	return nil
}

// encode returns job/fs: "root virtiofs TAG" or "root nfs ADDR PORT EXPORT
// GUESTADDR [MTU]", then "gateway ADDR" and a "nameserver ADDR" per
// nameserver when the guest has a way out, then "share PATH" per shared
// path, outer paths first.
func (fs *FS) encode() []byte {
	var b strings.Builder
	switch fs.Kind {
	case ShareVirtiofs:
		fmt.Fprintf(&b, "root virtiofs %s\n", fs.Tag)
	case ShareNFS:
		fmt.Fprintf(&b, "root nfs %s %d %s %s", fs.Addr, fs.Port, fs.Export, fs.GuestAddr)
		if fs.MTU > 0 {
			fmt.Fprintf(&b, " %d", fs.MTU)
		}
		b.WriteByte('\n')
	}
	if fs.Gateway != "" {
		fmt.Fprintf(&b, "gateway %s\n", fs.Gateway)
	}
	for _, ns := range fs.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	shares := append([]string(nil), fs.Shares...)
	sort.Strings(shares) // a parent sorts before its children
	for _, p := range shares {
		fmt.Fprintf(&b, "share %s\n", p)
	}
	return []byte(b.String())
}

// ParseFS reads job/fs as encode writes it.
func ParseFS(b []byte) (FS, error) {
	var fs FS
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "root":
			f := strings.Fields(rest)
			switch {
			case len(f) == 2 && f[0] == ShareVirtiofs:
				fs.Kind, fs.Tag = f[0], f[1]
			case (len(f) == 5 || len(f) == 6) && f[0] == ShareNFS:
				port, err := strconv.Atoi(f[2])
				if err != nil {
					return FS{}, fmt.Errorf("job fs line %d: port %q", i+1, f[2])
				}
				fs.Kind, fs.Addr, fs.Port, fs.Export, fs.GuestAddr = f[0], f[1], port, f[3], f[4]
				if len(f) == 6 {
					if fs.MTU, err = strconv.Atoi(f[5]); err != nil {
						return FS{}, fmt.Errorf("job fs line %d: mtu %q", i+1, f[5])
					}
				}
			default:
				return FS{}, fmt.Errorf("job fs line %d: %q is not a root line", i+1, line)
			}
		case "share":
			fs.Shares = append(fs.Shares, rest)
		case "gateway":
			fs.Gateway = rest
		case "nameserver":
			fs.Nameservers = append(fs.Nameservers, rest)
		case "":
		default:
			return FS{}, fmt.Errorf("job fs line %d: unknown word %q", i+1, word)
		}
	}
	if err := fs.Validate(); err != nil {
		return FS{}, err
	}
	return fs, nil
}

// Validate reports the first thing about u the guest could not use.
func (u *User) Validate() error {
	if u.Name == "" || strings.ContainsAny(u.Name, " \n\x00:") {
		return fmt.Errorf("payload user %q: give a name without spaces or colons", u.Name)
	}
	if u.Home != "" && (!path.IsAbs(u.Home) || strings.ContainsAny(u.Home, "\n\x00")) {
		return fmt.Errorf("payload user %s: home %q is not an absolute path", u.Name, u.Home)
	}
	return nil
}

// encode returns job/user: the name, uid, gid, the groups separated by
// spaces and the home directory, one per line.
func (u *User) encode() []byte {
	groups := make([]string, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Appendf(nil, "%s\n%d\n%d\n%s\n%s\n", u.Name, u.UID, u.GID, strings.Join(groups, " "), u.Home)
}

// ParseUser reads job/user as encode writes it.
func ParseUser(b []byte) (User, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		return User{}, fmt.Errorf("job user: %d lines, want 5 (name, uid, gid, groups, home)", len(lines))
	}
	uid, err1 := strconv.ParseUint(lines[1], 10, 32)
	gid, err2 := strconv.ParseUint(lines[2], 10, 32)
	if err1 != nil || err2 != nil {
		return User{}, fmt.Errorf("job user %s: uid %q or gid %q is not a number", lines[0], lines[1], lines[2])
	}
	u := User{Name: lines[0], UID: uint32(uid), GID: uint32(gid), Home: lines[4]}
	for _, g := range strings.Fields(lines[3]) {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return User{}, fmt.Errorf("job user %s: group %q is not a number", u.Name, g)
		}
		u.Groups = append(u.Groups, uint32(n))
	}
	if err := u.Validate(); err != nil {
		return User{}, err
	}
	return u, nil
}

// TempDirs are the host's temporary trees a job's guest has fresh copies
// of (tmpfs, made by the guest's init over the host's root): a host file
// there is not what the job sees unless its path is shared.
var TempDirs = []string{"/tmp", "/var/tmp", "/run"}

// InTempDir reports whether path lies in one of TempDirs.
func InTempDir(path string) bool {
	for _, p := range TempDirs {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
