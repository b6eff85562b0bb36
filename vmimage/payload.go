package vmimage

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"
)

// Payload is one job as the guest's init receives it: the files under /job
// of the per-job initramfs that the host appends to the image's base one.
type Payload struct {
	// Script is the job script, run as /job/script. A script that does not
	// start with "#!" is run by /bin/sh.
	Script []byte
	// Env is the job's complete environment, each entry "KEY=VALUE". Values
	// may hold any byte but NUL (spaces and newlines included).
	Env []string
	// Args are the script's arguments; they may be empty strings but may
	// not hold NUL.
	Args []string
	// WorkDir is the absolute directory the script starts in. Empty means
	// "/". In the initramfs root the guest creates it when missing; with
	// the host's root (FS) it must exist there.
	WorkDir string
	// User, when set, is whom the job runs as (job/user); nil runs it as
	// root.
	User *User
	// FS, when set, gives the job the host's tree as its root and its
	// shared paths (job/fs); nil leaves it the initramfs.
	FS *FS
	// Input is the absolute path, in the job's root, of the file the
	// script reads as its standard input (sbatch -i; job/input); "" is
	// /dev/null. The guest opens it as the job's user.
	Input string
	// Rlimits are soft resource limits, by Slurm's names, that the job's
	// processes get (sbatch --propagate; job/rlimits).
	Rlimits []Rlimit
	// Net, when set, is the job's private network (job/net): a
	// multi-node job's second card and its hosts.
	Net *Net
}

// Rlimit is one soft resource limit, by Slurm's name (CORE, NOFILE, ...);
// Value ^0 is unlimited.
type Rlimit struct {
	Name  string
	Value uint64
}

// Mode bits and sizes of the newc cpio format ("SVR4 with no CRC").
const (
	newcMagic  = "070701"
	newcHeader = 110 // magic + 13 fields of 8 hex digits
	modeDir    = 0o040000
	modeFile   = 0o100000
	trailer    = "TRAILER!!!"
)

// payloadEntry is one archive entry of a payload.
type payloadEntry struct {
	name string
	mode uint32
	data []byte
}

// Validate reports the first thing about p that the guest could not carry
// out faithfully.
func (p Payload) Validate() error {
	for i, kv := range p.Env {
		key, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return fmt.Errorf("payload env[%d] %.40q: not KEY=VALUE (add the '=')", i, kv)
		case key == "":
			return fmt.Errorf("payload env[%d] %.40q: empty variable name", i, kv)
		case strings.IndexByte(kv, 0) >= 0:
			return fmt.Errorf("payload env %s: value holds a NUL byte, which no environment can carry", key)
		}
	}
	for i, a := range p.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("payload args[%d]: holds a NUL byte, which no argument can carry", i)
		}
	}
	if p.User != nil {
		if err := p.User.Validate(); err != nil {
			return err
		}
	}
	if p.FS != nil {
		if err := p.FS.Validate(); err != nil {
			return err
		}
	}
	if p.Input != "" && (!path.IsAbs(p.Input) || strings.ContainsAny(p.Input, "\x00\n")) {
		return fmt.Errorf("payload input %q: not an absolute path on one line", p.Input)
	}
	for _, l := range p.Rlimits {
		if l.Name == "" || strings.ContainsAny(l.Name, "=\n\x00") {
			return fmt.Errorf("payload rlimit %q: not a limit's name", l.Name)
		}
	}
	if p.Net != nil {
		if err := p.Net.Validate(); err != nil {
			return err
		}
	}
	if p.WorkDir != "" {
		if !path.IsAbs(p.WorkDir) {
			return fmt.Errorf("payload workdir %q: not an absolute path (start it with /)", p.WorkDir)
		}
		if strings.ContainsAny(p.WorkDir, "\x00\n") {
			return fmt.Errorf("payload workdir %q: holds a newline or NUL", p.WorkDir)
		}
	}
	return nil
}

// entries lists the payload's archive entries in the order they are written:
// the directory first, so that the kernel creates it before its files.
func (p Payload) entries() []payloadEntry {
	wd := p.WorkDir
	if wd == "" {
		wd = "/"
	}
	ents := []payloadEntry{
		{name: "job", mode: modeDir | 0o755},
		{name: "job/script", mode: modeFile | 0o755, data: p.Script},
		{name: "job/env", mode: modeFile | 0o644, data: nulList(p.Env)},
		{name: "job/args", mode: modeFile | 0o644, data: nulList(p.Args)},
		{name: "job/workdir", mode: modeFile | 0o644, data: []byte(wd + "\n")},
	}
	if p.User != nil {
		ents = append(ents, payloadEntry{name: "job/user", mode: modeFile | 0o644, data: p.User.encode()})
	}
	if p.FS != nil {
		ents = append(ents, payloadEntry{name: "job/fs", mode: modeFile | 0o644, data: p.FS.encode()})
	}
	if p.Input != "" {
		ents = append(ents, payloadEntry{name: "job/input", mode: modeFile | 0o644, data: []byte(p.Input + "\n")})
	}
	if len(p.Rlimits) > 0 {
		var b bytes.Buffer
		for _, l := range p.Rlimits {
			fmt.Fprintf(&b, "%s=%d\n", l.Name, l.Value)
		}
		ents = append(ents, payloadEntry{name: "job/rlimits", mode: modeFile | 0o644, data: b.Bytes()})
	}
	if p.Net != nil {
		ents = append(ents, payloadEntry{name: "job/net", mode: modeFile | 0o644, data: p.Net.encode()})
	}
	return ents
}

// nulList joins items with a NUL after each one, so that an empty item
// stays visible and an empty list is an empty file.
func nulList(items []string) []byte {
	var b bytes.Buffer
	for _, s := range items {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// WritePayload writes p to w as an uncompressed newc cpio archive, ready to
// be appended to an image's base initramfs at a 4-byte boundary (see the
// package documentation). It is not compressed: under TCG the guest kernel
// unpacks a plain archive faster than it inflates a gzip one, and a job's
// payload is small. It writes nothing when p fails Validate.
func WritePayload(w io.Writer, p Payload) error {
	if err := p.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	cw := cpioWriter{w: bw}
	for _, e := range p.entries() {
		nlink := uint32(1)
		if e.mode&modeDir != 0 {
			nlink = 2
		}
		cw.entry(e.name, e.mode, nlink, e.data)
	}
	cw.entry(trailer, 0, 1, nil)
	if cw.err != nil {
		return fmt.Errorf("write payload: %w", cw.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write payload: %w", err)
	}
	return nil
}

// cpioWriter writes newc entries and remembers the first error.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	err error
}

// entry writes one header, name and data, each of header+name and data
// padded to a multiple of four bytes. Owner is root, mtime 0: the payload's
// bytes depend on its content only.
func (c *cpioWriter) entry(name string, mode, nlink uint32, data []byte) {
	if c.err != nil {
		return
	}
	ino := uint32(0)
	if name != trailer {
		c.ino++
		ino = c.ino
	}
	fields := [13]uint32{
		ino, mode, 0, 0, nlink, 0, uint32(len(data)),
		0, 0, 0, 0, uint32(len(name) + 1), 0,
	}
	hdr := make([]byte, 0, newcHeader+len(name)+4)
	hdr = append(hdr, newcMagic...)
	for _, f := range fields {
		hdr = fmt.Appendf(hdr, "%08X", f)
	}
	hdr = append(hdr, name...)
	hdr = append(hdr, 0)
	hdr = append(hdr, make([]byte, pad4(len(hdr)))...)
	if _, c.err = c.w.Write(hdr); c.err != nil {
		return
	}
	if _, c.err = c.w.Write(data); c.err != nil {
		return
	}
	_, c.err = c.w.Write(make([]byte, pad4(len(data))))
}

// pad4 returns how many bytes bring n up to a multiple of four.
func pad4(n int) int { return (4 - n%4) % 4 }
