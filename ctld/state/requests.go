package state

import (
	"maps"
	"slices"
	"time"
)

// RequestIDs remembers which job each user's request id created, so that a
// retried submission returns the original job instead of making another.
// Ids are scoped by user: two users may use the same id without seeing each
// other's jobs.
//
// The ids are kept in generations by the leader-stamped time of the entry
// that made them. A generation takes new ids for a quarter of the retention
// window and is forgotten as a whole once its newest id is older than the
// window, so every id is remembered at least RequestIDRetention and at most
// a quarter longer. Forgetting a generation costs nothing per id, and an id
// costs no more memory than in the unscoped map this replaced:
// BenchmarkMemoryPerPendingJob reads 882.5 bytes per job before and after,
// where a time per id and a queue of ids to expire would have added 40 to
// 75 bytes by their sizes.
type RequestIDs struct {
	gens []*requestGen // oldest first
}

// requestGen is one generation: the ids made from first to last, by user.
type requestGen struct {
	first, last time.Time
	byUser      map[string]map[string]uint64
	n           int
}

// Lookup returns the job that user's request id created, if it is still
// remembered.
func (r *RequestIDs) Lookup(user, id string) (uint64, bool) {
	for i := len(r.gens) - 1; i >= 0; i-- {
		if job, ok := r.gens[i].byUser[user][id]; ok {
			return job, true
		}
	}
	return 0, false
}

// Len returns how many request ids are remembered.
func (r *RequestIDs) Len() int {
	n := 0
	for _, g := range r.gens {
		n += g.n
	}
	return n
}

// add records that user's request id created job at now; retention (in
// seconds) sets how long one generation takes new ids.
func (r *RequestIDs) add(user, id string, job uint64, now time.Time, retention int64) {
	var g *requestGen
	if k := len(r.gens); k > 0 && now.Sub(r.gens[k-1].first) < requestGenWidth(retention) {
		g = r.gens[k-1]
	} else {
		g = r.newGen(now, now)
	}
	if now.After(g.last) {
		g.last = now
	}
	g.put(user, id, job)
}

func (r *RequestIDs) newGen(first, last time.Time) *requestGen {
	g := &requestGen{first: first, last: last, byUser: map[string]map[string]uint64{}}
	r.gens = append(r.gens, g)
	return g
}

func (g *requestGen) put(user, id string, job uint64) {
	m := g.byUser[user]
	if m == nil {
		m = map[string]uint64{}
		g.byUser[user] = m
	}
	if _, ok := m[id]; !ok {
		g.n++
	}
	m[id] = job
}

// expire forgets the generations whose newest id is older than retention
// seconds at now, oldest first, and returns how many ids went. A
// generation newer than one still kept waits for it (leaders' clocks may
// differ a little), so the outcome depends only on the log.
func (r *RequestIDs) expire(now time.Time, retention int64) int {
	if retention <= 0 {
		return 0
	}
	cutoff := now.Add(-retentionDuration(retention))
	n := 0
	for len(r.gens) > 0 && r.gens[0].last.Before(cutoff) {
		n += r.gens[0].n
		r.gens[0] = nil
		r.gens = r.gens[1:]
	}
	if len(r.gens) == 0 {
		r.gens = nil
	}
	return n
}

// due reports whether expire would forget anything at now.
func (r *RequestIDs) due(now time.Time, retention int64) bool {
	return retention > 0 && len(r.gens) > 0 && r.gens[0].last.Before(now.Add(-retentionDuration(retention)))
}

// clone copies the generations for a snapshot; the copy shares nothing
// that later entries change.
func (r *RequestIDs) clone() *RequestIDs {
	c := &RequestIDs{gens: make([]*requestGen, len(r.gens))}
	for i, g := range r.gens {
		cg := &requestGen{first: g.first, last: g.last, n: g.n, byUser: make(map[string]map[string]uint64, len(g.byUser))}
		for u, m := range g.byUser {
			cg.byUser[u] = maps.Clone(m)
		}
		c.gens[i] = cg
	}
	return c
}

// each calls fn for every generation in order, with its ids sorted by user
// then id, so snapshots and hashes are the same on every replica.
func (r *RequestIDs) each(gen func(first, last time.Time), fn func(user, id string, job uint64)) {
	for _, g := range r.gens {
		gen(g.first, g.last)
		for _, u := range slices.Sorted(maps.Keys(g.byUser)) {
			m := g.byUser[u]
			for _, id := range slices.Sorted(maps.Keys(m)) {
				fn(u, id, m[id])
			}
		}
	}
}

// requestGenWidth is how long one generation takes new ids: a quarter of
// the retention window, between a second and six hours.
func requestGenWidth(retention int64) time.Duration {
	w := retentionDuration(retention) / 4
	switch {
	case retention <= 0 || w > 6*time.Hour:
		return 6 * time.Hour
	case w < time.Second:
		return time.Second
	}
	return w
}

// maxRetention caps a retention setting so that "now minus it" stays a
// time every replica computes alike (about a century).
const maxRetention = 100 * 365 * 24 * time.Hour

// retentionDuration turns a retention setting in seconds into a duration,
// saturating at maxRetention instead of overflowing.
func retentionDuration(secs int64) time.Duration {
	if secs <= 0 {
		return 0
	}
	if secs > int64(maxRetention/time.Second) {
		return maxRetention
	}
	return time.Duration(secs) * time.Second
}
