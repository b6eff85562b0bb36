package fairshare

import (
	"fmt"
	"math"
	"time"
)

// Assoc is one node of the association tree: the root (Account "root"),
// tenants and accounts (User == ""), and users (leaves, User != "").
type Assoc struct {
	// Account is the account's name; for a user leaf it is the account the
	// user belongs to (an empty Account on a user leaf means its parent's).
	Account string
	// User is "" for accounts and the user's name for user leaves.
	User string
	// Shares is Slurm's RawShares. Zero means the node gets no share.
	Shares float64
	// Usage is the (already decayed) raw usage charged to this node itself.
	// For users it is their usage; accounts normally leave it 0 because the
	// package sums each account's subtree. Usage on the root stands for
	// usage no live association owns any more (Slurm keeps it in the root's
	// total).
	Usage float64
	// Children are the sub-accounts and users; a user's Children are ignored.
	Children []*Assoc
}

// Algorithm selects how user factors are computed.
type Algorithm string

// The algorithms Compute implements.
const (
	// FairTree is Slurm's default since 19.05 (fair_tree.html).
	FairTree Algorithm = "fairtree"
	// Classic is PriorityFlags=NO_FAIR_TREE (classic_fair_share.html).
	Classic Algorithm = "classic"
)

// ParseAlgorithm turns a configuration value into an Algorithm. The empty
// string selects FairTree, Slurm's default.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch Algorithm(s) {
	case "", FairTree:
		return FairTree, nil
	case Classic:
		return Classic, nil
	}
	return "", fmt.Errorf("fair-share algorithm %q: unknown (use %q or %q)", s, FairTree, Classic)
}

// Key names one user association.
type Key struct{ Account, User string }

// Row is one line of `sshare -l` output for an account or user association.
type Row struct {
	Account, User string
	// Depth is 0 for the root's children, 1 for their children, and so on.
	Depth int
	// RawShares is the association's configured shares.
	RawShares float64
	// NormShares is shares / siblings' shares (self included) under
	// FairTree, and the product of that ratio down the path from the root
	// under Classic.
	NormShares float64
	// RawUsage is the usage of the association's whole subtree.
	RawUsage float64
	// EffectvUsage is RawUsage / parent's RawUsage under FairTree, and
	// Slurm's classic effective usage under Classic (see the package doc).
	EffectvUsage float64
	// LevelFS is S/U among siblings: +Inf when U is 0 and S > 0, 0 when S
	// is 0. It is filled in under both algorithms.
	LevelFS float64
	// FairShare is the user's factor in [0,1]. For accounts it is what
	// sshare prints: 2^(-EffectvUsage/NormShares) under Classic, and 0 under
	// FairTree (where sshare leaves the cell empty).
	FairShare float64
}

// Compute returns one Row per association below the root, in depth-first
// order with siblings ordered as sshare orders them (users before
// sub-accounts, each by name), and every user's factor keyed by Key. Any alg
// other than Classic computes Fair Tree. A nil root gives no rows and an
// empty map. Compute does not modify root.
func Compute(root *Assoc, alg Algorithm) (rows []Row, factors map[Key]float64) {
	if root == nil {
		return nil, map[Key]float64{}
	}
	t := flatten(root)
	t.sumUsage()
	t.levelStats()
	if alg == Classic {
		t.classic()
	} else {
		t.fairTree()
	}
	return t.rows(alg)
}

// Decay returns usage decayed over elapsed with the given half-life:
// usage * 2^(-elapsed/halfLife). A halfLife <= 0 means no decay, and so does
// an elapsed <= 0 (usage never grows with time running backwards).
func Decay(usage float64, elapsed, halfLife time.Duration) float64 {
	if halfLife <= 0 || elapsed <= 0 {
		return usage
	}
	return usage * math.Exp2(-float64(elapsed)/float64(halfLife))
}

// rows turns the computed tree into sshare rows and the user factor map.
func (t *tree) rows(alg Algorithm) ([]Row, map[Key]float64) {
	rows := make([]Row, 0, len(t.nodes)-1)
	factors := make(map[Key]float64, t.users)
	for i := 1; i < len(t.nodes); i++ {
		nd := &t.nodes[i]
		r := Row{
			Account:   nd.account,
			User:      nd.user,
			Depth:     int(nd.depth),
			RawShares: nd.shares,
			RawUsage:  nd.usage,
			LevelFS:   nd.levelFS,
		}
		if alg == Classic {
			r.NormShares = nd.normShares
			r.EffectvUsage = nd.effUsage
			r.FairShare = classicFactor(nd.effUsage, nd.normShares)
		} else {
			r.NormShares = nd.levelShares
			r.EffectvUsage = nd.levelUsage
			if nd.isUser {
				r.FairShare = nd.factor
			}
		}
		if nd.isUser {
			factors[Key{Account: nd.account, User: nd.user}] = r.FairShare
		}
		rows = append(rows, r)
	}
	return rows, factors
}
