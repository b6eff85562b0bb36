package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// gangProfile builds a profile from steps (at, cpus), memory plentiful.
func gangProfile(steps ...[2]int64) profile {
	p := make(profile, len(steps))
	for i, s := range steps {
		p[i] = step{at: s[0], cpus: int(s[1]), mem: 1 << 20}
	}
	return p
}

func TestGangStart(t *testing.T) {
	const hour = int64(3600)
	tests := map[string]struct {
		nodes []gangNode
		dur   int64
		k     int
		at    int64
		chose []int
		never bool
	}{
		"enough free now": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}), cpus: 4}, {p: gangProfile([2]int64{0, 2}), cpus: 4},
				{p: gangProfile([2]int64{0, 8}), cpus: 4}},
			dur: hour, k: 2, at: 0, chose: []int{0, 2},
		},
		// n0 is free now, n1 from 2 h: together at 2 h, not at n0's
		// earliest (now) nor at the first time any one node frees.
		"the later of two": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}), cpus: 4}, {p: gangProfile([2]int64{0, 0}, [2]int64{2 * hour, 4}), cpus: 4}},
			dur:   hour, k: 2, at: 2 * hour, chose: []int{0, 1},
		},
		// n0 is free only until 1 h (a reservation then), n1 from 30 min:
		// their windows overlap by 30 min, too short for an hour's run,
		// so the gang waits for n0's reservation to end at 5 h.
		"overlap too short": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}, [2]int64{hour, 0}, [2]int64{5 * hour, 4}), cpus: 4},
				{p: gangProfile([2]int64{0, 0}, [2]int64{hour / 2, 4}), cpus: 4}},
			dur: hour, k: 2, at: 5 * hour, chose: []int{0, 1},
		},
		// n0's last start is at 1 h (it is taken at 2 h), n1's first
		// at 1 h plus a nanosecond: no start time suits both.
		"touching windows": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}, [2]int64{2 * hour, 0}), cpus: 4},
				{p: gangProfile([2]int64{0, 0}, [2]int64{hour + 1, 4}), cpus: 4}},
			dur: hour, k: 2, never: true,
		},
		"the run just fits": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}, [2]int64{2 * hour, 0}), cpus: 4},
				{p: gangProfile([2]int64{0, 0}, [2]int64{hour, 4}), cpus: 4}},
			dur: hour, k: 2, at: hour, chose: []int{0, 1},
		},
		"more nodes than there are": {nodes: []gangNode{{p: gangProfile([2]int64{0, 4}), cpus: 1}}, dur: hour, k: 2, never: true},
		"a node too small for ever": {
			nodes: []gangNode{{p: gangProfile([2]int64{0, 4}), cpus: 4}, {p: gangProfile([2]int64{0, 2}), cpus: 4}},
			dur:   hour, k: 2, never: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at, chose, ok := gangStart(tc.nodes, 0, tc.dur, tc.k)
			switch {
			case tc.never && ok:
				t.Errorf("gangStart = %d on %v, want never", at, chose)
			case !tc.never && (!ok || at != tc.at || !slices.Equal(chose, tc.chose)):
				t.Errorf("gangStart = %d on %v (%v), want %d on %v", at, chose, ok, tc.at, tc.chose)
			}
		})
	}
}

// TestGangStartProperty compares gangStart with a search that tries every
// candidate start (from and every step of every profile) in time order on
// random profiles: the same time, and the nodes it names fit then.
func TestGangStartProperty(t *testing.T) {
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 15))
		nodes := make([]gangNode, 1+r.IntN(8))
		for i := range nodes {
			p := profile{{at: 0, cpus: r.IntN(9), mem: int64(r.IntN(9))}}
			for at := int64(0); r.IntN(4) > 0; {
				at += 1 + int64(r.IntN(10))
				p = append(p, step{at: at, cpus: r.IntN(9), mem: int64(r.IntN(9))})
			}
			nodes[i] = gangNode{p: p, cpus: 1 + r.IntN(6), mem: int64(r.IntN(6))}
		}
		from, dur, k := int64(r.IntN(5)), 1+int64(r.IntN(12)), 1+r.IntN(len(nodes))
		want, wantOK := bruteGangStart(nodes, from, dur, k)
		at, chose, ok := gangStart(nodes, from, dur, k)
		if ok != wantOK || ok && at != want {
			t.Fatalf("seed %d: gangStart = %d (%v), the search %d (%v); nodes %+v, from %d, dur %d, k %d",
				seed, at, ok, want, wantOK, nodes, from, dur, k)
		}
		if !ok {
			continue
		}
		if len(chose) != k || !slices.IsSorted(chose) || len(slices.Compact(slices.Clone(chose))) != k {
			t.Fatalf("seed %d: chose %v, want %d distinct nodes", seed, chose, k)
		}
		for _, i := range chose {
			if n := nodes[i]; !n.p.fits(at, at+dur, n.cpus, n.mem) {
				t.Fatalf("seed %d: node %d chosen at %d does not fit: %+v", seed, i, at, n)
			}
		}
	}
}

func bruteGangStart(nodes []gangNode, from, dur int64, k int) (int64, bool) {
	times := []int64{from}
	for _, n := range nodes {
		for _, s := range n.p {
			if s.at >= from {
				times = append(times, s.at)
			}
		}
	}
	slices.Sort(times)
	for _, t := range times {
		fit := 0
		for _, n := range nodes {
			if n.p.fits(t, t+dur, n.cpus, n.mem) {
				fit++
			}
		}
		if fit >= k {
			return t, true
		}
	}
	return 0, false
}

// BenchmarkGangStart: the earliest start of a 64-node job over 10,000
// nodes, each running a few jobs that end at random times in the next
// day and with a reservation of some other job later on a tenth of them.
func BenchmarkGangStart(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			const day = int64(86400e9)
			nodes := make([]gangNode, n)
			for i := range nodes {
				var rel []release
				for range 1 + r.IntN(4) {
					rel = append(rel, release{at: r.Int64N(day), cpus: 8, mem: 16384})
				}
				p := buildProfile(nil, 0, 0, 0, rel)
				if i%10 == 0 {
					at := r.Int64N(day)
					p.take(at, at+day/4, 32, 65536)
				}
				nodes[i] = gangNode{p: p, cpus: 16, mem: 32768}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := gangStart(nodes, 0, day/8, 64); !ok {
					b.Fatal("no start")
				}
			}
		})
	}
}
