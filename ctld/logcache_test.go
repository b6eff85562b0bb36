package ctld

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func boltStore(t *testing.T) *raftboltdb.BoltStore {
	t.Helper()
	s, err := raftboltdb.NewBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sizedLog(index uint64, size int) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: make([]byte, size)}
}

// cached lists the indexes the cache holds, checking its byte count.
func cached(t *testing.T, c *logCache) []uint64 {
	t.Helper()
	var out []uint64
	total := 0
	for _, l := range c.ring {
		if l != nil {
			total += logSize(l)
		}
	}
	for i := c.lo; i <= c.hi && c.hi > 0; i++ {
		if l := c.ring[i%uint64(len(c.ring))]; l != nil && l.Index == i {
			out = append(out, i)
		}
	}
	if total != c.bytes {
		t.Fatalf("the cache counts %d bytes, its entries hold %d", c.bytes, total)
	}
	return out
}

func TestLogCacheBounds(t *testing.T) {
	kb := 1024 - 96 // an entry of kb bytes of data costs 1 KiB
	cases := map[string]struct {
		entries, maxBytes int
		store             [][2]int // index, data size
		want              []uint64
	}{
		"within both bounds":            {8, 8 << 10, [][2]int{{1, kb}, {2, kb}, {3, kb}}, []uint64{1, 2, 3}},
		"the count bound evicts oldest": {4, 1 << 20, [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}, []uint64{3, 4, 5, 6}},
		"the byte bound evicts oldest":  {64, 3 << 10, [][2]int{{1, kb}, {2, kb}, {3, kb}, {4, kb}}, []uint64{2, 3, 4}},
		"one big entry evicts the rest": {64, 3 << 10, [][2]int{{1, kb}, {2, kb}, {3, 10 * kb}}, []uint64{3}},
		"the newest stays however big":  {64, 1 << 10, [][2]int{{1, 100 * kb}}, []uint64{1}},
		"a gap starts afresh":           {64, 1 << 20, [][2]int{{1, 1}, {2, 1}, {7, 1}, {8, 1}}, []uint64{7, 8}},
		"going back starts afresh":      {64, 1 << 20, [][2]int{{5, 1}, {6, 1}, {3, 1}}, []uint64{3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := newLogCache(raft.NewInmemStore(), tc.entries, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.store {
				c.put(sizedLog(uint64(s[0]), s[1]))
			}
			if got := cached(t, c); !slices.Equal(got, tc.want) {
				t.Errorf("cached %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLogCacheReadsThrough stores entries in a bbolt log through the cache
// and reads each back, cached or evicted.
func TestLogCacheReadsThrough(t *testing.T) {
	c, err := newLogCache(boltStore(t), 16, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		l := sizedLog(i, 900)
		l.Data[0] = byte(i)
		logs = append(logs, l)
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if got := cached(t, c); len(got) != 4 || got[0] != 37 {
		t.Fatalf("cached %v, want the last 4 entries (37-40) under 4 KiB", got)
	}
	for i := uint64(1); i <= 40; i++ {
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("entry %d read back as index %d, first byte %d (%v)", i, l.Index, l.Data[0], err)
		}
	}
	if err := c.DeleteRange(1, 20); err != nil {
		t.Fatal(err)
	}
	if got := cached(t, c); len(got) != 0 {
		t.Errorf("after DeleteRange the cache still holds %v", got)
	}
	if first, err := c.FirstIndex(); err != nil || first != 21 {
		t.Errorf("first index %d (%v), want 21", first, err)
	}
}
