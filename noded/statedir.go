package noded

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"corral/internal/procref"
)

// spareIdle is how long an acknowledged run's directory is kept for the next
// run before it is removed.
const spareIdle = time.Second

// runDirs hands out the runs' state directories under root and takes them
// back once their reports are acknowledged.
//
// A run's directory appears under its name (<jobid>-<startindex>) only with
// its record complete: it is prepared under a dot-name and renamed into
// place. When the run's report is acknowledged the directory is renamed back
// to a dot-name, the durable "reported" mark (a rename is atomic), emptied in
// the background and kept as a spare for a later run for spareIdle, at most
// max of them; then it is removed. A restarted daemon removes every
// dot-directory unread.
//
// Spares exist because creating files is what a trivial job costs the disk.
// Every mkdir and file creation allocates an inode, and ext4 without a
// journal skips, one buffer lookup each, every inode freed in the last minute
// or more when it allocates one: at hundreds of jobs a second, six inodes per
// job cost milliseconds of kernel CPU per job. A spare keeps its inodes: its
// files are emptied, not removed, and written again in place (see
// procref.WriteInPlace). So an empty file must mean the same as no file, to the
// daemon and to the runners.
type runDirs struct {
	root string
	max  int
	idle time.Duration // spareIdle but in tests
	log  *slog.Logger

	mu       sync.Mutex
	spares   []spareDir // emptied, oldest first
	emptying int        // retired directories on their way to spares
	seq      uint64     // names fresh directories
	timer    *time.Timer
	closed   bool
	busy     sync.WaitGroup // background emptying and removals
}

type spareDir struct {
	path  string
	since time.Time
}

func newRunDirs(root string, max int, log *slog.Logger) *runDirs {
	return &runDirs{root: root, max: max, idle: spareIdle, log: log}
}

// create makes run k's directory holding record as its record file (see
// recordFile) and returns its path.
func (s *runDirs) create(k jobKey, record []byte) (string, error) {
	tmp := s.take()
	if tmp == "" {
		var err error
		if tmp, err = s.mkdir(); err != nil {
			return "", fmt.Errorf("creating the job's state directory: %w", err)
		}
	}
	dir := filepath.Join(s.root, k.String())
	if err := procref.WriteInPlace(filepath.Join(tmp, recordFile), record, 0o600); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("writing the job's record: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("naming the job's state directory: %w", err)
	}
	return dir, nil
}

// mkdir creates a fresh directory under a dot-name.
func (s *runDirs) mkdir() (string, error) {
	for {
		s.mu.Lock()
		s.seq++
		path := filepath.Join(s.root, ".n"+strconv.FormatUint(s.seq, 10))
		s.mu.Unlock()
		err := os.Mkdir(path, 0o700)
		if !errors.Is(err, fs.ErrExist) {
			return path, err
		}
	}
}

// take returns the most recently retired spare, or "" when there is none.
func (s *runDirs) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.spares)
	if n == 0 {
		return ""
	}
	path := s.spares[n-1].path
	s.spares = s.spares[:n-1]
	return path
}

// emptyDir truncates the regular files in dir but keep and removes
// everything else. Each file is opened with O_TRUNC and closed at once: a
// truncation to zero marks an ext4 file for a flush at its next close, which
// is cheap while no data was written since. It holds syscall.ForkLock for
// reading, as writeScript does and for the same reason: a job script
// truncated here is executed by the next run, which fails with ETXTBSY if a
// process forked meanwhile still holds it open for writing.
func emptyDir(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.Name() == keep && e.Type().IsRegular() {
			continue
		}
		if !e.Type().IsRegular() {
			// A symlink must not be followed, and runners keep plain files.
			if err := os.RemoveAll(path); err != nil {
				return err
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// retire marks run k reported by renaming its directory to a dot-name, and
// empties it in the background to keep it as a spare, or removes it. A run
// without a directory (its launch failed early) is retired already.
func (s *runDirs) retire(k jobKey) error {
	gone := filepath.Join(s.root, "."+k.String())
	if err := os.Rename(filepath.Join(s.root, k.String()), gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		// After Run returned nobody waits for a background removal.
		os.RemoveAll(gone)
		return nil
	}
	keep := len(s.spares)+s.emptying < s.max
	if keep {
		s.emptying++
	}
	s.busy.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.busy.Done()
		if !keep {
			os.RemoveAll(gone)
			return
		}
		err := emptyDir(gone, recordFile)
		if err != nil {
			s.log.Warn("cannot reuse a job's state directory; removing it", "dir", gone, "err", err)
		}
		s.keep(gone, err == nil)
	}()
	return nil
}

// keep makes an emptied directory a spare, or removes it when ok is false
// or the daemon stopped meanwhile.
func (s *runDirs) keep(path string, ok bool) {
	s.mu.Lock()
	s.emptying--
	ok = ok && !s.closed
	if ok {
		s.spares = append(s.spares, spareDir{path: path, since: time.Now()})
		if s.timer == nil {
			s.timer = time.AfterFunc(s.idle, s.expire)
		}
	}
	s.mu.Unlock()
	if !ok {
		os.RemoveAll(path)
	}
}

// expire removes the spares that were not reused within s.idle.
func (s *runDirs) expire() {
	s.mu.Lock()
	s.timer = nil
	if s.closed {
		s.mu.Unlock()
		return
	}
	cut := time.Now().Add(-s.idle)
	n := 0
	for n < len(s.spares) && !s.spares[n].since.After(cut) {
		n++
	}
	old := make([]string, n)
	for i := range old {
		old[i] = s.spares[i].path
	}
	s.spares = append(s.spares[:0], s.spares[n:]...)
	if len(s.spares) > 0 {
		s.timer = time.AfterFunc(time.Until(s.spares[0].since.Add(s.idle)), s.expire)
	}
	s.busy.Add(1)
	s.mu.Unlock()
	defer s.busy.Done()
	for _, p := range old {
		os.RemoveAll(p)
	}
}

// close removes every spare and waits for the background work under way;
// directories retired afterwards are removed at once.
func (s *runDirs) close() {
	s.mu.Lock()
	s.closed = true
	spares := s.spares
	s.spares = nil
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	for _, sp := range spares {
		os.RemoveAll(sp.path)
	}
	s.busy.Wait()
}

// replaceJSONFile replaces path with v atomically (temporary file, then
// rename): for a file a restarted daemon needs whole at every moment.
func replaceJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
