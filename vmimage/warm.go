package vmimage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Warm starts (see the package documentation, "Warm starts"): a guest
// booted for a snapshot prepares what every job of its shape needs, says
// CORRAL READY, and waits on the agent's port for a job; the node saves it
// and restores copies of it, each of which gets its job over the agent.

// The stages a snapshot's guest goes to before it says READY
// (corral.warm=STAGE on the kernel command line).
const (
	// WarmNet: the kernel modules of the share, the overlay and the agent
	// are loaded and the share's network card is up, but the guest has not
	// made a single connection, so nothing of its network stack's secrets
	// (TCP sequence and port keys, drawn at the first connection) is in
	// the snapshot. For guests with a way out (a partition's network
	// node).
	WarmNet = "net"
	// WarmRoot: WarmNet, and the host's tree is mounted as the overlay's
	// lower layer with the guest's own mounts in the new root, and the
	// shell and python have run once there (their pages are in the
	// guest's page cache). For guests whose only peer is their own file
	// server.
	WarmRoot = "root"
)

// FrameJob (host → guest, JSON JobStart) hands a guest restored from a
// snapshot its job: the job's payload follows as FrameData on
// StreamStdin and its FrameClose, exactly the archive WritePayload
// writes, and the guest's End says the job is in place (it starts just
// after) or why not.
const FrameJob FrameType = 13

// Sizes of a JobStart.
const (
	// SeedBytes is the host randomness a restored guest mixes into its
	// kernel's entropy pool before the job exists.
	SeedBytes = 64
	// MaxPayloadBytes bounds a job's payload over the agent: a 4 MiB
	// script, its environment (1 MiB at most) and its arguments.
	MaxPayloadBytes = 16 << 20
)

// JobStart is what a restored guest gets before its job: fresh
// randomness and the host's wall clock (the snapshot's is the time it
// was taken), and the size of the payload that follows.
type JobStart struct {
	// Seed is SeedBytes of the host's randomness: the guest credits them
	// to its kernel's entropy pool and reseeds its random generator, so
	// that no two guests restored from one snapshot draw the same numbers.
	Seed []byte `json:"seed"`
	// TimeUnixNano is the host's wall clock as it sent the request.
	TimeUnixNano int64 `json:"time_unix_nano"`
	// Size is the payload's length in bytes.
	Size int64 `json:"size"`
}

// Validate checks a JobStart.
func (s *JobStart) Validate() error {
	switch {
	case len(s.Seed) != SeedBytes:
		return fmt.Errorf("job start: a seed of %d bytes (want %d)", len(s.Seed), SeedBytes)
	case s.TimeUnixNano <= 0:
		return fmt.Errorf("job start: wall clock %d is not after 1970", s.TimeUnixNano)
	case s.Size <= 0 || s.Size > MaxPayloadBytes:
		return fmt.Errorf("job start: a payload of %d bytes (1 to %d)", s.Size, MaxPayloadBytes)
	}
	return nil
}

// PayloadFile is one file of a job's payload as ParsePayload reads it:
// its name under job/ ("script", "env", ...) and its bytes.
type PayloadFile struct {
	Name string
	Data []byte
}

// payloadNames are the files a payload may hold (see "The job payload").
var payloadNames = map[string]bool{"script": true, "env": true, "args": true, "workdir": true, "user": true, "fs": true,
	"input": true, "rlimits": true, "net": true}

// ParsePayload reads a job's payload, the archive WritePayload writes:
// the job directory and the files under it. Anything else (another path,
// a link, a device, a name twice, a malformed header, data after the
// trailer) is refused: the guest writes the files under /job, and the
// archive came over a channel. It is the guest's reader of the payload a
// FrameJob carries.
func ParsePayload(b []byte) ([]PayloadFile, error) {
	var files []PayloadFile
	seen := map[string]bool{}
	for off := 0; ; {
		if len(b)-off < newcHeader {
			return nil, fmt.Errorf("payload: archive cut short at byte %d (no trailer)", off)
		}
		h := b[off : off+newcHeader]
		if string(h[:6]) != newcMagic {
			return nil, fmt.Errorf("payload: byte %d: not a newc header", off)
		}
		var fields [13]uint32
		for i := range fields {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("payload: byte %d: header field %d is not hex", off, i)
			}
			fields[i] = uint32(v)
		}
		mode, size, nameLen := fields[1], int(fields[6]), int(fields[11])
		nameEnd := off + newcHeader + nameLen
		if nameLen < 1 || nameEnd > len(b) || b[nameEnd-1] != 0 {
			return nil, fmt.Errorf("payload: byte %d: a name that does not fit", off)
		}
		name := string(b[off+newcHeader : nameEnd-1])
		dataAt := nameEnd + pad4(nameEnd)
		if size < 0 || dataAt > len(b) || size > len(b)-dataAt {
			return nil, fmt.Errorf("payload: %q: its data does not fit", clip(name))
		}
		data := b[dataAt : dataAt+size]
		off = dataAt + size + pad4(dataAt+size)
		if name == trailer {
			if off < len(b) && strings.Trim(string(b[off:]), "\x00") != "" {
				return nil, errors.New("payload: data after the trailer")
			}
			return files, nil
		}
		if seen[name] {
			return nil, fmt.Errorf("payload: %q twice", clip(name))
		}
		seen[name] = true
		base, ok := strings.CutPrefix(name, "job/")
		switch {
		case name == "job" && mode&0o170000 == modeDir && size == 0:
		case ok && payloadNames[base] && mode&0o170000 == modeFile:
			files = append(files, PayloadFile{Name: base, Data: data})
		default:
			return nil, fmt.Errorf("payload: %q (mode %o) is not a file of a job's payload", clip(name), mode)
		}
	}
}
