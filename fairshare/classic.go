package fairshare

import "math"

// classic fills in normalised shares and effective usage the way Slurm's
// classic algorithm defines them (classic_fair_share.html):
//
//	NormShares   = parent's NormShares * Shares / siblings' Shares (root: 1)
//	UsageNorm    = RawUsage / root's RawUsage
//	EffectvUsage = UsageNorm                                  under the root
//	EffectvUsage = UsageNorm + (parent's EffectvUsage - UsageNorm)
//	                 * Shares / siblings' Shares              below that
//
// Parents come before their children in t.nodes, so one forward pass sees
// every parent's values before it needs them.
func (t *tree) classic() {
	root := &t.nodes[0]
	root.normShares = 1
	root.effUsage = 1
	total := root.usage
	for i := 1; i < len(t.nodes); i++ {
		nd := &t.nodes[i]
		parent := &t.nodes[nd.parent]
		nd.normShares = parent.normShares * nd.levelShares
		norm := 0.0
		if total > 0 {
			norm = nd.usage / total
		}
		switch {
		case nd.parent == 0:
			nd.effUsage = norm
		case nd.sibShare == 0:
			// Slurm's guard against dividing by siblings' shares of 0.
			nd.effUsage = norm
		default:
			nd.effUsage = norm + (parent.effUsage-norm)*nd.shares/nd.sibShare
		}
	}
}

// classicFactor is F = 2^(-EffectvUsage/NormShares), and 0 for an
// association without shares (Slurm's priority_p_calc_fs_factor with a
// dampening factor of 1).
func classicFactor(effUsage, normShares float64) float64 {
	if !(normShares > 0) {
		return 0
	}
	return math.Exp2(-effUsage / normShares)
}
