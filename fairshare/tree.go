package fairshare

import (
	"cmp"
	"math"
	"slices"
)

// node is one association in the flattened tree. Index 0 is the root; the
// others follow in pre-order with siblings in canonical (sshare) order, so a
// node's descendants always have larger indices than the node itself.
type node struct {
	account, user string
	isUser        bool
	// zeroShare is set when this node or an ancestor has 0 shares, so the
	// node holds no share of the machine at all.
	zeroShare bool
	depth     int32
	parent    int32
	// The node's children are kids[kidStart : kidStart+kidCount].
	kidStart, kidCount int32

	shares   float64 // raw shares, sanitised
	usage    float64 // subtree usage, own usage included
	sibShare float64 // sum of raw shares of the node and its siblings

	levelShares float64 // S = shares / sibShare (0 when sibShare is 0)
	levelUsage  float64 // U = usage / parent usage (0 when that is 0)
	levelFS     float64 // S/U, +Inf when U == 0 < S, 0 when S == 0

	normShares float64 // classic: product of levelShares from the root
	effUsage   float64 // classic effective usage
	factor     float64 // fair tree user factor
}

// tree is the flattened association tree Compute works on. Flattening into
// one slice keeps the passes allocation-free and makes every sum run in the
// same (canonical) order whatever order the caller's Children were in, so
// shuffled input gives bit-identical output.
type tree struct {
	nodes []node
	kids  []int32
	users int // number of user leaves

	nextKid int32
	scratch []*Assoc // stack of children being sorted, one frame per level
}

// flatten copies root's tree into a tree, ordering every sibling list
// canonically.
func flatten(root *Assoc) *tree {
	n := countNodes(root)
	t := &tree{
		nodes:   make([]node, 0, n),
		kids:    make([]int32, n-1),
		scratch: make([]*Assoc, 0, n),
	}
	t.add(root, -1, -1, root.Account)
	t.scratch = nil
	return t
}

// countNodes counts the associations flatten will keep: non-nil nodes,
// without the children of users.
func countNodes(a *Assoc) int {
	n := 1
	if a.User != "" {
		return n
	}
	for _, c := range a.Children {
		if c != nil {
			n += countNodes(c)
		}
	}
	return n
}

// add appends a and its subtree in pre-order and returns a's index.
func (t *tree) add(a *Assoc, parent, depth int32, parentAccount string) int32 {
	idx := int32(len(t.nodes))
	nd := node{
		account: a.Account,
		user:    a.User,
		isUser:  a.User != "" && parent >= 0,
		depth:   depth,
		parent:  parent,
		shares:  sanitise(a.Shares),
		usage:   sanitise(a.Usage),
	}
	if nd.isUser && nd.account == "" {
		nd.account = parentAccount
	}
	if parent >= 0 {
		nd.zeroShare = nd.shares == 0 || t.nodes[parent].zeroShare
	}
	t.nodes = append(t.nodes, nd)
	if nd.isUser {
		t.users++
		return idx
	}
	base := len(t.scratch)
	for _, c := range a.Children {
		if c != nil {
			t.scratch = append(t.scratch, c)
		}
	}
	frame := t.scratch[base:]
	slices.SortStableFunc(frame, compareAssoc)
	start := t.nextKid
	t.nextKid += int32(len(frame))
	t.nodes[idx].kidStart, t.nodes[idx].kidCount = start, int32(len(frame))
	for j, c := range frame {
		t.kids[start+int32(j)] = t.add(c, idx, depth+1, nd.account)
	}
	t.scratch = t.scratch[:base]
	return idx
}

// compareAssoc orders siblings as sshare does: users before accounts, then
// by name. The later keys only make the order total for siblings that share
// a name, which Slurm does not allow.
func compareAssoc(a, b *Assoc) int {
	if (a.User != "") != (b.User != "") {
		if a.User != "" {
			return -1
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(a.User, b.User),
		cmp.Compare(a.Account, b.Account),
		cmp.Compare(sanitise(a.Shares), sanitise(b.Shares)),
		cmp.Compare(sanitise(a.Usage), sanitise(b.Usage)),
	)
}

// sanitise maps negative, NaN and infinite inputs to 0, so that no sum or
// ratio below can turn into NaN.
func sanitise(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return 0
	}
	return x
}

// sumUsage adds every node's usage into its parent. Descendants have larger
// indices, so walking backwards finishes a subtree before its root is added.
func (t *tree) sumUsage() {
	for i := len(t.nodes) - 1; i > 0; i-- {
		t.nodes[t.nodes[i].parent].usage += t.nodes[i].usage
	}
}

// levelStats fills in S, U and the Level Fairshare of every non-root node
// (fair_tree.html, "Level Fairshare Calculation").
func (t *tree) levelStats() {
	for p := range t.nodes {
		parent := &t.nodes[p]
		kids := t.kids[parent.kidStart : parent.kidStart+parent.kidCount]
		sum := 0.0
		for _, k := range kids {
			sum += t.nodes[k].shares
		}
		for _, k := range kids {
			nd := &t.nodes[k]
			nd.sibShare = sum
			if sum > 0 {
				nd.levelShares = nd.shares / sum
			}
			if parent.usage > 0 {
				nd.levelUsage = nd.usage / parent.usage
			}
			switch {
			case nd.levelShares == 0:
				nd.levelFS = 0
			case nd.levelUsage == 0:
				nd.levelFS = math.Inf(1)
			default:
				nd.levelFS = nd.levelShares / nd.levelUsage
			}
		}
	}
}
