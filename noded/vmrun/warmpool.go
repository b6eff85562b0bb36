package vmrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"corral/internal/procref"
)

// Bounds of the snapshots a node keeps, unless its Config says otherwise.
const (
	defaultWarmMax      = 8
	defaultWarmMaxBytes = 4 << 30
	// warmRetry is how long a shape whose snapshot could not be made
	// waits before it is tried again.
	warmRetry = 10 * time.Minute
)

// Files of a snapshot in the warm directory: KEY.state is the migration
// stream, KEY.json its warmSnap. Both are root's, 0600, in a directory of
// mode 0700: they hold a guest's memory, which is the node's business.
const (
	snapStateExt = ".state"
	snapMetaExt  = ".json"
	snapTmpExt   = ".tmp"
	snapBootExt  = ".boot" // the state directory of a snapshot's VM while it is made
)

// warmSnap is a snapshot on disk: what restoring from it needs and what
// tells a damaged or stale file.
type warmSnap struct {
	Key   string `json:"key"`
	Shape string `json:"shape"`
	Stage string `json:"stage"`
	Image string `json:"image"`
	// Contents are the hashes of the image's kernel and initramfs and of
	// QEMU's binary when it was made (contentKeys): a snapshot of other
	// ones is stale.
	Contents string `json:"contents"`
	// Size, ModTimeNano and SHA256 are the stream file's when it was
	// written: a file that changed since is not used.
	Size        int64  `json:"size"`
	ModTimeNano int64  `json:"mtime_ns"`
	SHA256      string `json:"sha256"`
	// RootHandleKey is the handle key of the read-only root export the
	// snapshot's guest mounted (stage root): the file server of every VM
	// restored from it takes it for that export (nfsd.Config).
	RootHandleKey []byte    `json:"root_handle_key"`
	Created       time.Time `json:"created"`
	// MakeSeconds is how long making it took, boot and wait included;
	// SaveSeconds how long QEMU took to write the stream.
	MakeSeconds float64 `json:"make_s"`
	SaveSeconds float64 `json:"save_s"`

	lastUsed time.Time
}

// warmPool is a node's warm starts' snapshots: found by shape, made in the
// background one at a time, bounded in number and bytes (the least
// recently used go first), and dropped when found damaged or stale.
type warmPool struct {
	r        *Runner
	log      *slog.Logger
	dir      string
	maxCount int
	maxBytes int64

	mu     sync.Mutex
	snaps  map[string]*warmSnap
	making map[string]bool      // shapes queued or being made
	failed map[string]time.Time // shapes whose snapshot failed, when
	queue  chan *warmShape
	worker bool
	// ctx ends with Close, which stops the snapshot being made; done is
	// closed when the worker has stopped.
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	done   chan struct{}
}

// newWarmPool opens the warm directory: it creates it (0700), removes what
// an interrupted snapshot left there and loads the snapshots it holds,
// dropping those whose stream file is missing or changed, and those whose
// image or QEMU changed since.
func newWarmPool(r *Runner, dir string, maxCount int, maxBytes int64) (*warmPool, error) {
	if maxCount <= 0 {
		maxCount = defaultWarmMax
	}
	if maxBytes <= 0 {
		maxBytes = defaultWarmMaxBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("warm starts' directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("warm starts' directory %s: %w", dir, err)
	}
	p := &warmPool{r: r, log: r.log.With("warm_dir", dir), dir: dir, maxCount: maxCount, maxBytes: maxBytes,
		snaps: map[string]*warmSnap{}, making: map[string]bool{}, failed: map[string]time.Time{}, queue: make(chan *warmShape, 16),
		done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("warm starts' directory %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, snapTmpExt), strings.HasSuffix(name, snapBootExt):
			p.removeBoot(filepath.Join(dir, name))
		case strings.HasSuffix(name, snapMetaExt):
			p.load(strings.TrimSuffix(name, snapMetaExt))
		}
	}
	for _, e := range ents {
		// A stream without its record is of no use.
		if key, ok := strings.CutSuffix(e.Name(), snapStateExt); ok && p.snaps[key] == nil {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	p.evict()
	return p, nil
}

// removeBoot removes what a snapshot being made left: a partial stream, or
// the state directory of its VM (whose QEMU ended with the daemon's, or
// is killed here through Recover).
func (p *warmPool) removeBoot(path string) {
	if strings.HasSuffix(path, snapBootExt) {
		// A VM left running there (its daemon was killed) is ended.
		if h, _, err := p.r.Recover(path); err == nil {
			h.Kill(0)
			h.Wait()
		}
	}
	if err := os.RemoveAll(path); err != nil {
		p.log.Warn("cannot remove an interrupted snapshot's files", "path", path, "err", err)
	}
}

// load adds the snapshot named key from its record, or removes its files
// when it is unusable.
func (p *warmPool) load(key string) {
	var s warmSnap
	err := procref.ReadJSON(p.metaPath(key), &s)
	if err == nil && s.Key != key {
		err = fmt.Errorf("the record names snapshot %s", s.Key)
	}
	if err == nil {
		err = p.check(&s)
	}
	if err == nil {
		if img, ierr := p.r.image(s.Image); ierr != nil {
			err = ierr
		} else if c, cerr := p.r.contentKeys(img); cerr != nil || c != s.Contents {
			err = errors.Join(errors.New("its image or QEMU changed since it was made"), cerr)
		}
	}
	if err != nil {
		p.log.Info("removing a warm start's snapshot", "key", key, "why", err)
		p.remove(key)
		return
	}
	s.lastUsed = s.Created
	p.snaps[key] = &s
}

func (p *warmPool) statePath(key string) string { return filepath.Join(p.dir, key+snapStateExt) }
func (p *warmPool) metaPath(key string) string  { return filepath.Join(p.dir, key+snapMetaExt) }

// check tells whether the stream file is still the one written: its size
// and modification time (a stat, cheap enough for every warm start; the
// checksum is checked when the daemon starts, verify).
func (p *warmPool) check(s *warmSnap) error {
	fi, err := os.Stat(p.statePath(s.Key))
	if err != nil {
		return err
	}
	return s.sameFile(fi)
}

func (s *warmSnap) sameFile(fi fs.FileInfo) error {
	if fi.Size() != s.Size || fi.ModTime().UnixNano() != s.ModTimeNano {
		return fmt.Errorf("its stream file changed since it was written (%d bytes, modified %s; recorded %d bytes, %s)",
			fi.Size(), fi.ModTime().Format(time.RFC3339Nano), s.Size, time.Unix(0, s.ModTimeNano).Format(time.RFC3339Nano))
	}
	return nil
}

// verify reads every snapshot's stream back and drops those whose
// checksum is not the recorded one: a file damaged on disk would restore a
// guest with damaged memory, which QEMU does not check. It runs in the
// background when the daemon starts.
func (p *warmPool) verify() {
	p.mu.Lock()
	var snaps []*warmSnap
	for _, s := range p.snaps {
		snaps = append(snaps, s)
	}
	p.mu.Unlock()
	for _, s := range snaps {
		sum, err := fileSHA256(p.statePath(s.Key))
		if err == nil && sum != s.SHA256 {
			err = errors.New("its stream's checksum is not the one recorded: the file is damaged")
		}
		if err != nil {
			p.drop(s, err)
		}
	}
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// get returns the snapshot of a shape, nil when there is none.
func (p *warmPool) get(key string) *warmSnap {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.snaps[key]
	if s != nil {
		s.lastUsed = time.Now()
	}
	return s
}

// drop removes a snapshot that failed a job or a check, saying why. Its
// shape gets no new one for warmRetry: a shape whose snapshots fail is
// not made again and again.
func (p *warmPool) drop(s *warmSnap, why error) {
	p.mu.Lock()
	if p.snaps[s.Key] != s {
		p.mu.Unlock()
		return
	}
	delete(p.snaps, s.Key)
	p.failed[s.Key] = time.Now()
	p.mu.Unlock()
	p.log.Warn("removing a warm start's snapshot", "key", s.Key, "shape", s.Shape, "why", why)
	p.remove(s.Key)
}

func (p *warmPool) remove(key string) {
	for _, path := range []string{p.statePath(key), p.metaPath(key)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Warn("cannot remove a warm start's snapshot file", "path", path, "err", err)
		}
	}
}

// want asks for a snapshot of sh to be made in the background, unless one
// exists, is on its way, or failed lately.
func (p *warmPool) want(sh *warmShape) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.snaps[sh.key] != nil || p.making[sh.key] || time.Since(p.failed[sh.key]) < warmRetry {
		return
	}
	select {
	case p.queue <- sh:
		p.making[sh.key] = true
	default:
		return // many shapes at once: this one waits for a later job
	}
	if !p.worker {
		p.worker = true
		go p.work()
	}
}

// close stops the worker: the snapshot being made is abandoned (its VM
// ended, its files removed), and none is made after.
func (p *warmPool) close() {
	p.mu.Lock()
	worker := p.worker
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	p.cancel()
	if worker {
		<-p.done
	}
}

// Close stops the runner's background work: the warm starts' snapshot
// being made is abandoned, and no other is made. Jobs' VMs run on.
func (r *Runner) Close() {
	if r.warm != nil {
		r.warm.close()
	}
}

// work makes the queued snapshots, one at a time.
func (p *warmPool) work() {
	defer close(p.done)
	for sh := range p.queue {
		if p.ctx.Err() != nil {
			return
		}
		s, err := p.r.makeSnapshot(p, sh)
		p.mu.Lock()
		delete(p.making, sh.key)
		if err != nil {
			p.failed[sh.key] = time.Now()
		} else {
			s.lastUsed = time.Now()
			p.snaps[sh.key] = s
			delete(p.failed, sh.key)
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Warn("cannot make a warm start's snapshot; jobs of its shape boot cold", "shape", sh.desc, "err", err)
			continue
		}
		p.log.Info("warm start's snapshot made", "key", s.Key, "shape", s.Shape, "bytes", s.Size,
			"make_s", s.MakeSeconds, "save_s", s.SaveSeconds)
		p.evict()
	}
}

// evict removes the least recently used snapshots until the pool is within
// its bounds.
func (p *warmPool) evict() {
	p.mu.Lock()
	snaps := make([]*warmSnap, 0, len(p.snaps))
	var total int64
	for _, s := range p.snaps {
		snaps = append(snaps, s)
		total += s.Size
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].lastUsed.Before(snaps[j].lastUsed) })
	var gone []*warmSnap
	for len(snaps) > p.maxCount || (total > p.maxBytes && len(snaps) > 0) {
		s := snaps[0]
		snaps = snaps[1:]
		total -= s.Size
		delete(p.snaps, s.Key)
		gone = append(gone, s)
	}
	p.mu.Unlock()
	for _, s := range gone {
		p.log.Info("removing the least recently used warm start's snapshot", "key", s.Key, "shape", s.Shape,
			"max_count", p.maxCount, "max_bytes", p.maxBytes)
		p.remove(s.Key)
	}
}

// WarmSnapshot describes one of a node's warm starts' snapshots.
type WarmSnapshot struct {
	Key, Shape string
	Bytes      int64
	Created    time.Time
	// Make is how long making it took, Save how long QEMU took to write
	// it.
	Make, Save time.Duration
}

// WarmSnapshots lists the snapshots the runner holds, by key.
func (r *Runner) WarmSnapshots() []WarmSnapshot {
	if r.warm == nil {
		return nil
	}
	p := r.warm
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []WarmSnapshot
	for _, s := range p.snaps {
		out = append(out, WarmSnapshot{Key: s.Key, Shape: s.Shape, Bytes: s.Size, Created: s.Created,
			Make: time.Duration(s.MakeSeconds * float64(time.Second)), Save: time.Duration(s.SaveSeconds * float64(time.Second))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
