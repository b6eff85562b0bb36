// Package fairshare computes Slurm-style fair-share factors: one number in
// [0,1] per (account, user) association that the priority calculation
// weighs, plus the rows `sshare -l` would print.
//
// It owns the arithmetic only. It must never do I/O, read the clock, start
// goroutines or keep state between calls: the caller hands it an
// association tree whose usage is already decayed (see Decay) and gets back
// values, so the controller and the simulator get identical answers from
// identical trees. Its main entry point is Compute:
//
//	Assoc tree ─► flatten (siblings in sshare order, subtree usage summed)
//	           ─► S, U, Level FS for every node
//	           ─► FairTree: rank users depth-first  │  Classic: 2^(-UE/S)
//	           ─► []Row (sshare) + map[Key]float64 (user factors)
//
// # Quantities
//
// For a node n with parent p and siblings (n included) sib:
//
//	RawUsage(n) = Usage(n) + Σ RawUsage(children of n)
//	S(n)        = Shares(n) / Σ Shares(sib)               0 when the sum is 0
//	U(n)        = RawUsage(n) / RawUsage(p)               0 when RawUsage(p) is 0
//	LF(n)       = S(n) / U(n)                              +Inf when U is 0 < S,
//	                                                       0 when S is 0
//
// # Fair Tree (https://slurm.schedmd.com/fair_tree.html)
//
// Row.NormShares is S(n), Row.EffectvUsage is U(n), Row.LevelFS is LF(n).
// Starting at the root, the children of a node are sorted by LF, highest
// first, and visited depth-first; each user takes the next rank as it is
// found. With N ranked users, ranks count down from N and a user's factor is
// rank/N: the first user visited gets N/N = 1, the last 1/N. Ties follow
// the document's three rules:
//
//  1. sibling users with equal LF get the same rank, and the next user
//     after the tie takes the rank it would have had without it
//     (competition ranking: 1.0, 1.0, then 1/3 with N = 3);
//  2. sibling accounts with equal LF have their children merged into one
//     list, which is then sorted and visited as a single level;
//  3. a user with the same LF as a sibling account (users sort first on a
//     tie) shares its rank with that account's highest ranked user.
//
// A user with no share (its own Shares is 0, or an ancestor's is) gets
// factor 0 and takes no rank, so N counts only users that hold a share.
// Under FairTree an account's Row.FairShare is 0, where sshare prints an
// empty cell.
//
// # Classic (https://slurm.schedmd.com/classic_fair_share.html)
//
//	NormShares(n)   = NormShares(p) * S(n)                NormShares(root) = 1
//	UsageNorm(n)    = RawUsage(n) / RawUsage(root)        0 when that is 0
//	EffectvUsage(n) = UsageNorm(n)                        when p is the root
//	EffectvUsage(n) = UsageNorm(n) + (EffectvUsage(p) - UsageNorm(n))
//	                    * Shares(n) / Σ Shares(sib)       below that, or
//	                  UsageNorm(n)                        when Σ Shares(sib) is 0
//	F(n)            = 2^(-EffectvUsage(n) / NormShares(n)) 0 when NormShares is 0
//
// Row.NormShares, Row.EffectvUsage and Row.FairShare carry these for users
// and accounts alike (sshare prints F for accounts too).
//
// # Decay
//
// Decay(u, t, h) = u * 2^(-t/h). Slurm decays every PriorityCalcPeriod by
// D = 2^(-period/h); applying that k times equals Decay over k periods.
//
// # Determinism
//
// Sibling lists are sorted (users before accounts, then by name) before any
// sum is taken, so the order of Children never changes a single bit of the
// output. Fair Tree ties are broken by user name, then account name, after
// LF and users-before-accounts; since tied users share a rank, the tie
// break only fixes the visit order, never a factor. No map is iterated.
// Slurm forbids siblings with the same name; if a tree has them anyway,
// they are ordered by shares, then usage, then input order, and if two user
// leaves end up with the same Key the later one in row order wins.
//
// # Where this differs from Slurm
//
//   - Zero shares under Fair Tree: Slurm gives such users LF 0, visits them
//     last among their siblings and still hands them rank/N > 0, counting
//     them in N. Here they get 0 and are left out of N, matching Classic,
//     where NormShares 0 already gives 0.
//   - Merging tied accounts: the rule above is the one fair_tree.html
//     states. Slurm's own _count_tied_accounts (fair_tree.c, as read) stops
//     at the first sibling that is an account, so it never merges; tied
//     accounts are visited one after the other and only the first user of
//     the second one inherits the tie. Results differ only on exact ties.
//   - No root row: Rows start at the root's children (Depth 0). sshare
//     prints a root line; its RawUsage is the sum of the Depth 0 rows plus
//     the root's own Usage.
//   - Row.LevelFS is filled in under Classic too, where Slurm leaves it
//     unset; it does not affect Classic factors.
//   - Not supported: FairShare=parent, FairShareDampeningFactor (fixed at
//     1), the depth-oblivious and level-based variants, per-TRES billing
//     weights (Usage is one number), and Slurm's long double arithmetic
//     (float64 here).
//   - Negative, NaN and infinite Shares or Usage are treated as 0.
package fairshare
