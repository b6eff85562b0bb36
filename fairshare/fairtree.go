package fairshare

import (
	"cmp"
	"slices"
)

// fairTree ranks every user that holds a share and sets its factor to
// rank/N (fair_tree.html, "Algorithm" and "Ties").
func (t *tree) fairTree() {
	r := ranker{t: t, buf: make([]int32, 0, len(t.nodes))}
	for i := range t.nodes {
		if t.nodes[i].isUser && !t.nodes[i].zeroShare {
			r.ranked++
		}
	}
	if r.ranked == 0 {
		return
	}
	r.rank, r.rnt = r.ranked, r.ranked
	r.buf = r.appendKids(r.buf, 0)
	r.visit(0, len(r.buf), false)
}

// ranker carries the state of the depth-first walk. rank is the rank the
// next tied user gets; rnt ("rank, no ties") is the rank it would get
// without a tie. Both count down from the number of ranked users, as in
// Slurm's _calc_tree_fs.
type ranker struct {
	t      *tree
	buf    []int32 // stack of sibling lists, one frame per level being visited
	ranked int
	rank   int
	rnt    int
}

// appendKids appends the children of p that hold a share. Children without
// one get factor 0 and take no rank, so they are left out of the walk.
func (r *ranker) appendKids(buf []int32, p int32) []int32 {
	nd := &r.t.nodes[p]
	for _, k := range r.t.kids[nd.kidStart : nd.kidStart+nd.kidCount] {
		if !r.t.nodes[k].zeroShare {
			buf = append(buf, k)
		}
	}
	return buf
}

// visit sorts the siblings in buf[start:end] by Level Fairshare and walks
// them in that order: a user takes the next rank, an account is descended
// into. The tie rules are Slurm's:
//
//  1. sibling users with the same Level FS get the same rank;
//  2. sibling accounts with the same Level FS have their children merged
//     into one list before it is sorted and walked;
//  3. a user tied with a sibling account shares its rank with the account's
//     highest ranked user (users sort before accounts on equal Level FS,
//     and accountTied carries the tie into the first child).
func (r *ranker) visit(start, end int, accountTied bool) {
	nodes := r.t.nodes
	seg := r.buf[start:end]
	slices.SortFunc(seg, func(a, b int32) int {
		x, y := &nodes[a], &nodes[b]
		if x.levelFS != y.levelFS {
			if x.levelFS > y.levelFS {
				return -1
			}
			return 1
		}
		if x.isUser != y.isUser {
			if x.isUser {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(x.user, y.user), cmp.Compare(x.account, y.account), cmp.Compare(a, b))
	})
	for i := 0; i < len(seg); i++ {
		nd := &nodes[seg[i]]
		tied := accountTied
		if i > 0 {
			tied = nodes[seg[i-1]].levelFS == nd.levelFS
		}
		if nd.isUser {
			if !tied {
				r.rank = r.rnt
			}
			nd.factor = float64(r.rank) / float64(r.ranked)
			r.rnt--
			continue
		}
		j := i + 1
		for j < len(seg) && !nodes[seg[j]].isUser && nodes[seg[j]].levelFS == nd.levelFS {
			j++
		}
		base := len(r.buf)
		for _, acct := range seg[i:j] {
			r.buf = r.appendKids(r.buf, acct)
		}
		r.visit(base, len(r.buf), tied)
		r.buf = r.buf[:base]
		i = j - 1
	}
}
