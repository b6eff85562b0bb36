package ctld

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"corral/ctld/state"
)

// FSM applies committed Raft entries to the cluster state (package
// ctld/state, which decides what each entry does). It is the only writer
// of state. Besides state it keeps watch channels that wake blocked
// desired-state queries and the leader's scheduler; these are notifications
// only and never influence what Apply computes.
type FSM struct {
	mu    sync.RWMutex
	state *state.State
	log   *slog.Logger

	watchMu  sync.Mutex
	watches  map[string]chan struct{}
	anyWatch chan struct{}
	// Changed receives a value (non-blocking) after any entry that may let
	// a pending job start; the leader's scheduler loop listens to it.
	Changed chan struct{}
	// Notices receives a value (non-blocking) after an entry that put a
	// job notification in the outbox; the leader's mailer listens to it.
	Notices chan struct{}
	// freeing is set while a goroutine returns freed memory to the OS;
	// freeAgain asks it for one more round (a purge applied meanwhile).
	freeing   atomic.Bool
	freeAgain chan struct{}
	// bursts returns the memory a burst of submissions left behind. It is
	// a pointer so that its pending timer keeps only it alive, not the
	// FSM and its state.
	bursts *burstReleaser
	// observe, when set, is told of every applied entry: its command, the
	// leader's append time, when its apply began and how long it took
	// (metrics; never read by Apply itself).
	observe func(t state.CommandType, appended, began time.Time, took time.Duration)
	// acct writes the accounting records of what entries end (nil: no
	// store; acctwriter.go).
	acct *acctWriter
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM over an empty state.
func NewFSM(log *slog.Logger) *FSM {
	if log == nil {
		log = slog.Default()
	}
	return &FSM{
		state:     state.New(),
		log:       log,
		watches:   make(map[string]chan struct{}),
		anyWatch:  make(chan struct{}),
		Changed:   make(chan struct{}, 1),
		Notices:   make(chan struct{}, 1),
		freeAgain: make(chan struct{}, 1),
		bursts:    &burstReleaser{},
	}
}

// Apply decodes and applies one entry. A decode failure or unknown command
// type panics: a replica that cannot apply the log must stop rather than
// diverge.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	t, cmd, err := state.Decode(l.Data)
	if err != nil {
		f.log.Error("cannot apply raft entry; stopping", "index", l.Index, "err", err)
		panic(fmt.Sprintf("ctld: raft entry %d: %v", l.Index, err))
	}
	began := time.Now()
	f.mu.Lock()
	res := f.applyContained(t, cmd, l.Index)
	f.accountEnds(t, cmd, l.Index)
	changed := f.state.TakeTouched()
	noticed := f.state.TakeNoticesAdded() > 0
	f.mu.Unlock()
	if noticed {
		select {
		case f.Notices <- struct{}{}:
		default:
		}
	}
	if f.observe != nil {
		f.observe(t, l.AppendedAt, began, time.Since(began))
	}
	f.notify(t, changed, res)
	if t == state.CmdSubmitJobs {
		f.bursts.note(len(l.Data))
	}
	return res
}

// burstReleaser returns freed memory to the OS once a burst of
// submissions is over. Submitting decodes each request and entry (a job's
// environment is kilobytes of JSON) and leaves the heap at twice what the
// jobs keep: the runtime's scavenger gives back only what lies above that
// goal, so without a forced collection a controller that took 5,000 jobs
// through the CLI stayed at 7 KB of RSS per job though it kept 1.4 KB. It
// forces one after burstQuiet without submissions, once burstBytes of
// them were applied since the last one; a steady trickle costs one every
// burstBytes. Like returnMemory it touches this process only.
type burstReleaser struct {
	mu    sync.Mutex
	bytes int
	timer *time.Timer
}

const (
	burstBytes = 512 << 10
	burstQuiet = 2 * time.Second
)

func (b *burstReleaser) note(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes += n; b.bytes < burstBytes {
		return
	}
	if b.timer != nil {
		b.timer.Reset(burstQuiet)
		return
	}
	b.timer = time.AfterFunc(burstQuiet, func() {
		b.mu.Lock()
		b.bytes, b.timer = 0, nil
		b.mu.Unlock()
		debug.FreeOSMemory()
	})
}

// applyContained applies a decoded command and turns a panic inside its
// apply into the entry's error result. The panic is a bug, but a
// deterministic one: every replica fails the same entry at the same point,
// so the replicas stay equal, and a leader that crashed on it would crash
// again on every restart and every new leader after it.
func (f *FSM) applyContained(t state.CommandType, cmd any, index uint64) (res any) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("applying a raft entry failed; its effect may be partial", "index", index, "command", t, "panic", r, "stack", string(debug.Stack()))
			res = fmt.Errorf("applying %s at index %d failed: %v", t, index, r)
		}
	}()
	return f.state.Apply(index, t, cmd)
}

func (f *FSM) notify(t state.CommandType, nodes []string, res any) {
	f.watchMu.Lock()
	for _, name := range nodes {
		if ch, ok := f.watches[name]; ok {
			close(ch)
			delete(f.watches, name)
		}
	}
	close(f.anyWatch)
	f.anyWatch = make(chan struct{})
	f.watchMu.Unlock()

	wake := true
	switch t {
	case state.CmdNodeHeartbeats, state.CmdSetMember, state.CmdMailTimeEvents, state.CmdClaimNotices, state.CmdNoticesDone:
		wake = false
	case state.CmdPurgeJobs:
		// Removing finished jobs frees no resources.
		wake = false
		if pr, _ := res.(*state.PurgeResult); pr != nil && pr.Shrunk {
			f.returnMemory()
		}
	case state.CmdApplyPlan:
		// A plan frees nothing, unless a stop lent CPUs or a cancel
		// ended a job a dependant waits on; a partly skipped plan needs
		// a rerun too.
		pr, _ := res.(*state.PlanResult)
		wake = pr != nil && pr.Rerun()
	}
	if wake {
		select {
		case f.Changed <- struct{}{}:
		default:
		}
	}
}

// returnMemory runs debug.FreeOSMemory in the background, once at a time,
// after a purge that shrank the state (PurgeResult.Shrunk). Without it the
// memory of 200,000 purged jobs stayed resident: nothing else allocating,
// not even a collection ran, let alone the scavenger. A steady flow of
// purges never shrinks the state, so it never forces a collection. It is a
// side effect on this process only and changes no state.
func (f *FSM) returnMemory() {
	select {
	case f.freeAgain <- struct{}{}:
	default: // one round is already asked for
	}
	if !f.freeing.CompareAndSwap(false, true) {
		return // the running goroutine takes the request
	}
	go func() {
		for {
			select {
			case <-f.freeAgain:
				debug.FreeOSMemory()
				continue
			default:
			}
			f.freeing.Store(false)
			// A request sent after the check above and before the Store
			// found freeing set: take it unless another goroutine did.
			if len(f.freeAgain) == 0 || !f.freeing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// WatchNode returns a channel closed when node name's desired state changes.
func (f *FSM) WatchNode(name string) <-chan struct{} {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	ch, ok := f.watches[name]
	if !ok {
		ch = make(chan struct{})
		f.watches[name] = ch
	}
	return ch
}

// WatchAny returns a channel closed after the next applied entry.
func (f *FSM) WatchAny() <-chan struct{} {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	return f.anyWatch
}

// Read runs fn with the state under the read lock. fn must not keep maps,
// but may keep job and node pointers (they are never mutated).
func (f *FSM) Read(fn func(s *state.State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Hash returns a digest of the replicated state; replicas that applied the
// same log must agree on it.
func (f *FSM) Hash() string {
	h, _ := f.HashAt()
	return h
}

// HashAt returns the state digest and the index it was taken at.
func (f *FSM) HashAt() (string, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Hash(), f.state.Index
}

// Snapshot captures the current state; it is written by Persist outside
// the lock.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	// The records of the entries the snapshot covers must be on disk
	// before Raft may drop those entries.
	f.mu.RLock()
	index := f.state.Index
	f.mu.RUnlock()
	f.accountSnapshot(index)
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{snap: f.state.Snapshot()}, nil
}

// fsmSnapshot is a state.Snapshot as Raft persists it.
type fsmSnapshot struct{ snap *state.Snapshot }

// Persist streams the snapshot into Raft's sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.snap.Write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the snapshot holds only immutable pointers.
func (s *fsmSnapshot) Release() {}

// Restore replaces the state with a persisted snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := state.ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = s
	f.accountRestored()
	f.mu.Unlock()
	f.watchMu.Lock()
	for name, ch := range f.watches {
		close(ch)
		delete(f.watches, name)
	}
	f.watchMu.Unlock()
	select {
	case f.Changed <- struct{}{}:
	default:
	}
	return nil
}
