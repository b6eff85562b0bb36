package ctld

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the most recent Raft entries in memory in front of the
// bbolt log, as raft.LogCache does, but bounded by bytes as well as by
// count. raft.LogCache holds its last 4,096 entries whatever their size, and
// a burst of submissions writes entries of up to 4,096 jobs (about 1 MB
// each): after 200,000 jobs had been submitted, cancelled and purged, the
// cache alone still held 58 MB of their entries until thousands of newer
// entries pushed them out. The newest entries are the ones read (to
// replicate them and to apply them); an older one that was evicted is read
// from bbolt.
type logCache struct {
	store    raft.LogStore
	maxBytes int

	mu    sync.RWMutex
	ring  []*raft.Log
	lo    uint64 // the cached entries are a window lo..hi; 0 when empty
	hi    uint64
	bytes int
}

var _ raft.LogStore = (*logCache)(nil)

// Limits of the controller's log cache.
const (
	logCacheEntries = 4096
	logCacheBytes   = 8 << 20
)

func newLogCache(store raft.LogStore, entries, maxBytes int) (*logCache, error) {
	if entries <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("log cache: %d entries, %d bytes: both must be positive", entries, maxBytes)
	}
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, entries)}, nil
}

// logSize is what an entry costs the cache.
func logSize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 96 }

// IsMonotonic passes the store's answer through, as raft.LogCache does.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	cached := c.ring[idx%uint64(len(c.ring))]
	c.mu.RUnlock()
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}
	return c.store.GetLog(idx, log)
}

func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		// A copy: on the leader l is the Log inside its apply future, and
		// caching it would keep the whole future (its channels, its
		// response) alive as long as the entry stays cached.
		cp := *l
		c.put(&cp)
	}
	return nil
}

// put caches l, the entry after the newest cached one (anything else
// starts the window afresh), then evicts the oldest entries while the
// window is over its count or its bytes; the newest entry always stays.
func (c *logCache) put(l *raft.Log) {
	if c.hi == 0 || l.Index != c.hi+1 {
		c.reset()
		c.lo = l.Index
	}
	c.hi = l.Index
	slot := &c.ring[l.Index%uint64(len(c.ring))]
	if *slot != nil {
		c.bytes -= logSize(*slot) // the entry a full ring's length older
	}
	*slot = l
	c.bytes += logSize(l)
	for c.lo < c.hi && (c.hi-c.lo >= uint64(len(c.ring)) || c.bytes > c.maxBytes) {
		slot := &c.ring[c.lo%uint64(len(c.ring))]
		if *slot != nil && (*slot).Index == c.lo {
			c.bytes -= logSize(*slot)
			*slot = nil
		}
		c.lo++
	}
}

func (c *logCache) reset() {
	clear(c.ring)
	c.lo, c.hi, c.bytes = 0, 0, 0
}

func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange empties the cache, as raft.LogCache does: deletes are rare
// (compaction after a snapshot, a follower's conflicting suffix).
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.reset()
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

// cachedBytes is what the cached entries cost (at most its maxBytes).
func (c *logCache) cachedBytes() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytes
}
