package fairshare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// Fixtures read like the sacctmgr tree they describe:
//
//	root(acct("A", 1, user("a1", 1, 30)))
//
// is root → account A (1 share) → user a1 (1 share, 30 units of usage).

func root(children ...*Assoc) *Assoc {
	return &Assoc{Account: "root", Children: children}
}

// acct builds an account and stamps its name on its user children, as the
// association tree does.
func acct(name string, shares float64, children ...*Assoc) *Assoc {
	for _, c := range children {
		if c.User != "" {
			c.Account = name
		}
	}
	return &Assoc{Account: name, Shares: shares, Children: children}
}

func user(name string, shares, usage float64) *Assoc {
	return &Assoc{User: name, Shares: shares, Usage: usage}
}

const tolerance = 1e-9

func near(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= tolerance
}

// rowName is "A" for account A and "A/u" for user u in account A.
func rowName(r Row) string {
	if r.User == "" {
		return r.Account
	}
	return r.Account + "/" + r.User
}

func rowsByName(rows []Row) map[string]Row {
	m := make(map[string]Row, len(rows))
	for _, r := range rows {
		m[rowName(r)] = r
	}
	return m
}

func checkFactors(t *testing.T, got, want map[Key]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d factors %v, want %d %v", len(got), got, len(want), want)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s/%s: no factor, want %.4f", k.Account, k.User, w)
			continue
		}
		if !near(g, w) {
			t.Errorf("%s/%s: factor %.6f, want %.6f", k.Account, k.User, g, w)
		}
	}
}

// checkRows compares the named fields of the rows in want ("A" or "A/u") and
// leaves the others alone; NaN in want means "don't check".
func checkRows(t *testing.T, rows []Row, want map[string]Row) {
	t.Helper()
	got := rowsByName(rows)
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("no row %s", name)
			continue
		}
		fields := []struct {
			field     string
			got, want float64
		}{
			{"NormShares", g.NormShares, w.NormShares},
			{"EffectvUsage", g.EffectvUsage, w.EffectvUsage},
			{"LevelFS", g.LevelFS, w.LevelFS},
			{"FairShare", g.FairShare, w.FairShare},
		}
		for _, f := range fields {
			if !math.IsNaN(f.want) && !near(f.got, f.want) {
				t.Errorf("%s: %s = %.6f, want %.6f", name, f.field, f.got, f.want)
			}
		}
	}
}

var nan = math.NaN()

// lf is a row expectation that checks only LevelFS.
func lf(v float64) Row {
	return Row{NormShares: nan, EffectvUsage: nan, LevelFS: v, FairShare: nan}
}

func TestDecay(t *testing.T) {
	tests := map[string]struct {
		usage             float64
		elapsed, halfLife time.Duration
		want              float64
		exact             bool // powers of two must come out bit-exact
	}{
		// 80 * 2^(-1) = 40.
		"one half-life halves": {usage: 80, elapsed: time.Hour, halfLife: time.Hour, want: 40, exact: true},
		// 80 * 2^(-3) = 80/8 = 10.
		"three half-lives give an eighth": {usage: 80, elapsed: 21 * 24 * time.Hour, halfLife: 7 * 24 * time.Hour, want: 10, exact: true},
		// 80 * 2^(-0.5) = 80 * 0.7071 = 56.5685.
		"half a half-life":               {usage: 80, elapsed: 30 * time.Minute, halfLife: time.Hour, want: 80 * math.Sqrt2 / 2},
		"zero half-life is no decay":     {usage: 80, elapsed: time.Hour, halfLife: 0, want: 80, exact: true},
		"negative half-life is no decay": {usage: 80, elapsed: time.Hour, halfLife: -time.Hour, want: 80, exact: true},
		"no time elapsed":                {usage: 80, elapsed: 0, halfLife: time.Hour, want: 80, exact: true},
		"negative elapsed does not grow": {usage: 80, elapsed: -time.Hour, halfLife: time.Hour, want: 80, exact: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Decay(tc.usage, tc.elapsed, tc.halfLife)
			if (tc.exact && got != tc.want) || !near(got, tc.want) {
				t.Errorf("Decay(%v, %v, %v) = %v, want %v", tc.usage, tc.elapsed, tc.halfLife, got, tc.want)
			}
		})
	}
}

// TestDecayComposes checks that decaying twice over t equals decaying once
// over 2t, which is what lets the caller decay every PriorityCalcPeriod.
func TestDecayComposes(t *testing.T) {
	h := 90 * time.Minute
	twice := Decay(Decay(1000, 7*time.Minute, h), 7*time.Minute, h)
	once := Decay(1000, 14*time.Minute, h)
	if !near(twice, once) {
		t.Errorf("decayed twice over 7m = %v, once over 14m = %v", twice, once)
	}
}

func TestFairTree(t *testing.T) {
	inf := math.Inf(1)
	tests := map[string]struct {
		tree *Assoc
		want map[Key]float64
		rows map[string]Row
	}{
		// root → A(1): a1 30, a2 10 (A = 40); B(1): b1 15, b2 5 (B = 20).
		// Level 0: S = 1/2 each; U(A) = 40/60, U(B) = 20/60;
		//   LF(A) = 0.5/0.6667 = 0.75, LF(B) = 0.5/0.3333 = 1.5 → B first.
		// In B: LF(b2) = 0.5/0.25 = 2, LF(b1) = 0.5/0.75 = 0.6667.
		// In A: LF(a2) = 0.5/0.25 = 2, LF(a1) = 0.5/0.75 = 0.6667.
		// Visit order b2, b1, a2, a1 with N = 4: 4/4, 3/4, 2/4, 1/4.
		"idle account's users rank first": {
			tree: root(
				acct("A", 1, user("a1", 1, 30), user("a2", 1, 10)),
				acct("B", 1, user("b1", 1, 15), user("b2", 1, 5)),
			),
			want: map[Key]float64{
				{"B", "b2"}: 1, {"B", "b1"}: 0.75, {"A", "a2"}: 0.5, {"A", "a1"}: 0.25,
			},
			rows: map[string]Row{"A": lf(0.75), "B": lf(1.5), "B/b2": lf(2), "A/a1": lf(2.0 / 3)},
		},
		// root → T1(3) → p(1): u1 30, u2 10;  q(1): u3 (2 shares) 0, u4 20
		//      → T2(1) → r(1): u5 10, u6 0
		// Usage: p 40, q 20, T1 60, r 10, T2 10, root 70.
		// Level 0: LF(T1) = (3/4)/(60/70) = 0.875, LF(T2) = (1/4)/(10/70) = 1.75
		//   → all of T2 before all of T1, although u3 has LF +Inf.
		// T2: LF(r) = 1/1 = 1; in r: LF(u6) = 0.5/0 = +Inf, LF(u5) = 0.5/1 = 0.5.
		// T1: LF(p) = 0.5/(40/60) = 0.75, LF(q) = 0.5/(20/60) = 1.5 → q first.
		//   q: LF(u3) = (2/3)/0 = +Inf, LF(u4) = (1/3)/1 = 0.3333.
		//   p: LF(u2) = 0.5/0.25 = 2,   LF(u1) = 0.5/0.75 = 0.6667.
		// Visit order u6 u5 u3 u4 u2 u1, N = 6: 6/6 5/6 4/6 3/6 2/6 1/6.
		"three levels follow LF at each level": {
			tree: root(
				acct("T1", 3,
					acct("p", 1, user("u1", 1, 30), user("u2", 1, 10)),
					acct("q", 1, user("u3", 2, 0), user("u4", 1, 20)),
				),
				acct("T2", 1, acct("r", 1, user("u5", 1, 10), user("u6", 1, 0))),
			),
			want: map[Key]float64{
				{"r", "u6"}: 1, {"r", "u5"}: 5.0 / 6, {"q", "u3"}: 4.0 / 6,
				{"q", "u4"}: 3.0 / 6, {"p", "u2"}: 2.0 / 6, {"p", "u1"}: 1.0 / 6,
			},
			rows: map[string]Row{
				"T1": {NormShares: 0.75, EffectvUsage: 60.0 / 70, LevelFS: 0.875, FairShare: 0},
				"T2": {NormShares: 0.25, EffectvUsage: 10.0 / 70, LevelFS: 1.75, FairShare: 0},
				"r":  lf(1), "p": lf(0.75), "q": lf(1.5),
				"r/u6": lf(inf), "r/u5": lf(0.5), "q/u3": lf(inf), "q/u4": lf(1.0 / 3),
				"p/u2": lf(2), "p/u1": lf(2.0 / 3),
			},
		},
		// root → A(1): x 10, y 10, z 20. S = 1/3 each, U = 1/4, 1/4, 1/2;
		// LF(x) = LF(y) = 1.3333, LF(z) = 0.6667. x and y share rank 3 (3/3);
		// z takes the rank it would have had without the tie, 1 (1/3).
		"tied sibling users share a rank": {
			tree: root(acct("A", 1, user("x", 1, 10), user("y", 1, 10), user("z", 1, 20))),
			want: map[Key]float64{{"A", "x"}: 1, {"A", "y"}: 1, {"A", "z"}: 1.0 / 3},
		},
		// root → A(1): user w 10, account B(1): b1 0, b2 10.
		// In A: S(w) = S(B) = 1/2, U(w) = U(B) = 10/20 → LF 1 both; w sorts
		// first and takes rank 3 (3/3). B is tied with w, so its first user
		// b1 (LF +Inf) shares w's rank: 3/3. b2 (LF 0.5) takes rank 1: 1/3.
		"user tied with sibling account shares its top user's rank": {
			tree: root(acct("A", 1,
				user("w", 1, 10),
				acct("B", 1, user("b1", 1, 0), user("b2", 1, 10)),
			)),
			want: map[Key]float64{{"A", "w"}: 1, {"B", "b1"}: 1, {"B", "b2"}: 1.0 / 3},
		},
		// root → A(1): a1 10, a2 30;  B(1): b1 20, b2 20.
		// LF(A) = LF(B) = 0.5/(40/80) = 1: the children are merged into one
		// list: LF(a1) = 0.5/0.25 = 2, LF(b1) = LF(b2) = 0.5/0.5 = 1,
		// LF(a2) = 0.5/0.75 = 0.6667. N = 4: a1 4/4; b1, b2 tied at 3/4;
		// a2 gets rank 1: 1/4. (Walking A then B instead would give a2 3/4.)
		"tied sibling accounts are merged": {
			tree: root(
				acct("A", 1, user("a1", 1, 10), user("a2", 1, 30)),
				acct("B", 1, user("b1", 1, 20), user("b2", 1, 20)),
			),
			want: map[Key]float64{{"A", "a1"}: 1, {"B", "b1"}: 0.75, {"B", "b2"}: 0.75, {"A", "a2"}: 0.25},
		},
		// root → A(1): u0 (0 shares) 0, u1 10, u2 30;  Z(0): z1 0.
		// u0 and z1 (its account has no share) get 0 and take no rank, so
		// N = 2. LF(u1) = 0.5/0.25 = 2 → 2/2; LF(u2) = 0.5/0.75 → 1/2.
		"users without a share get 0": {
			tree: root(
				acct("A", 1, user("u0", 0, 0), user("u1", 1, 10), user("u2", 1, 30)),
				acct("Z", 0, user("z1", 1, 0)),
			),
			want: map[Key]float64{{"A", "u0"}: 0, {"A", "u1"}: 1, {"A", "u2"}: 0.5, {"Z", "z1"}: 0},
			rows: map[string]Row{"A/u0": lf(0), "Z": lf(0)},
		},
		// root → A(1): a1, a2;  B(2): b1. No usage anywhere, so every U is 0
		// and every LF is +Inf. A and B tie and are merged; a1, a2 and b1 tie
		// and all get rank 3 of 3: 1.
		"no usage at all ties everyone": {
			tree: root(
				acct("A", 1, user("a1", 1, 0), user("a2", 1, 0)),
				acct("B", 2, user("b1", 1, 0)),
			),
			want: map[Key]float64{{"A", "a1"}: 1, {"A", "a2"}: 1, {"B", "b1"}: 1},
			rows: map[string]Row{
				"A": lf(inf), "B": lf(inf), "A/a1": lf(inf), "A/a2": lf(inf), "B/b1": lf(inf),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rows, factors := Compute(tc.tree, FairTree)
			checkFactors(t, factors, tc.want)
			checkRows(t, rows, tc.rows)
		})
	}
}

func TestClassic(t *testing.T) {
	tests := map[string]struct {
		tree *Assoc
		want map[Key]float64
		rows map[string]Row
	}{
		// The example of classic_fair_share.html. Root usage is 100 (30 of
		// it charged to the root itself), so normalised usage is usage/100.
		// root → A(40) → B(30): user1 20
		//              → C(10): user2 25, user3 0
		//      → D(60) → E(25): user4 25
		//              → F(35): user5 0
		// NormShares: A .4, D .6, B .3, C .1, E .25, F .35,
		//   user1 .3, user2 = user3 = .1 * 1/2 = .05, user4 .25, user5 .35.
		// EffectvUsage: A .45, D .25 (first tier: own usage);
		//   B = .20 + (.45 - .20) * 30/40 = .3875
		//   C = .25 + (.45 - .25) * 10/40 = .3
		//   E = .25 + (.25 - .25) * 25/60 = .25
		//   F = 0   + (.25 - 0)   * 35/60 = .145833
		//   user1 = .2 + (.3875 - .2) * 1/1 = .3875
		//   user2 = .25 + (.3 - .25) * 1/2  = .275
		//   user3 = 0 + (.3 - 0) * 1/2      = .15
		//   user4 = .25 + 0                 = .25
		//   user5 = 0 + .145833 * 1/1       = .145833
		// F = 2^(-UE/S):
		//   user1 2^(-.3875/.3)    = 2^(-1.2917) = 0.4085
		//   user2 2^(-.275/.05)    = 2^(-5.5)    = 0.0221
		//   user3 2^(-.15/.05)     = 2^(-3)      = 0.1250
		//   user4 2^(-.25/.25)     = 2^(-1)      = 0.5000
		//   user5 2^(-.145833/.35) = 2^(-0.4167) = 0.7492
		//   account A 2^(-.45/.4) = 2^(-1.125) = 0.4585
		"slurm documentation example": {
			tree: &Assoc{Account: "root", Usage: 30, Children: []*Assoc{
				acct("A", 40,
					acct("B", 30, user("user1", 1, 20)),
					acct("C", 10, user("user2", 1, 25), user("user3", 1, 0)),
				),
				acct("D", 60,
					acct("E", 25, user("user4", 1, 25)),
					acct("F", 35, user("user5", 1, 0)),
				),
			}},
			want: map[Key]float64{
				{"B", "user1"}: math.Exp2(-0.3875 / 0.3),
				{"C", "user2"}: math.Exp2(-5.5),
				{"C", "user3"}: 0.125,
				{"E", "user4"}: 0.5,
				{"F", "user5"}: math.Exp2(-5.0 / 12),
			},
			rows: map[string]Row{
				"A":       {NormShares: 0.4, EffectvUsage: 0.45, LevelFS: nan, FairShare: math.Exp2(-1.125)},
				"B":       {NormShares: 0.3, EffectvUsage: 0.3875, LevelFS: nan, FairShare: nan},
				"C":       {NormShares: 0.1, EffectvUsage: 0.3, LevelFS: nan, FairShare: nan},
				"F":       {NormShares: 0.35, EffectvUsage: 0.25 * 35 / 60, LevelFS: nan, FairShare: nan},
				"C/user2": {NormShares: 0.05, EffectvUsage: 0.275, LevelFS: nan, FairShare: nan},
				"C/user3": {NormShares: 0.05, EffectvUsage: 0.15, LevelFS: nan, FairShare: nan},
			},
		},
		// root → A(1): u0 (0 shares) 10, u1 10;  Z(0): z1 0.
		// NormShares(u0) = 0 and NormShares(z1) = 0 * 1 = 0 → factor 0.
		// u1 holds all of A's shares (0 + 1): NormShares = 1 * 1/1 = 1.
		// Usage norm: A 20/20 = 1, u0 = u1 = 10/20 = .5; UE(A) = 1 (first tier),
		//   UE(u1) = .5 + (1 - .5) * 1/1 = 1 → 2^(-1/1) = 0.5000;
		//   UE(u0) = .5 + (1 - .5) * 0/1 = .5 (but no share, so 0).
		"no shares gives 0": {
			tree: root(
				acct("A", 1, user("u0", 0, 10), user("u1", 1, 10)),
				acct("Z", 0, user("z1", 1, 0)),
			),
			want: map[Key]float64{{"A", "u0"}: 0, {"A", "u1"}: 0.5, {"Z", "z1"}: 0},
			rows: map[string]Row{
				"A/u0": {NormShares: 0, EffectvUsage: 0.5, LevelFS: 0, FairShare: 0},
				"A/u1": {NormShares: 1, EffectvUsage: 1, LevelFS: 2, FairShare: 0.5},
				"Z":    {NormShares: 0, EffectvUsage: 0, LevelFS: 0, FairShare: 0},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rows, factors := Compute(tc.tree, Classic)
			checkFactors(t, factors, tc.want)
			checkRows(t, rows, tc.rows)
		})
	}
}

// TestRows checks the sshare shape of the output: order (users before
// sub-accounts, each by name, whatever the input order), depth, subtree
// usage, and FairShare on account rows under each algorithm.
func TestRows(t *testing.T) {
	tree := root(
		acct("B", 1, acct("B2", 1, user("y", 1, 4)), user("z", 1, 1), acct("B1", 1), user("x", 1, 2)),
		acct("A", 1, user("a", 1, 3)),
	)
	wantOrder := []string{"A", "A/a", "B", "B/x", "B/z", "B1", "B2", "B2/y"}
	wantDepth := []int{0, 1, 0, 1, 1, 1, 1, 2}
	wantUsage := []float64{3, 3, 7, 2, 1, 0, 4, 4}
	for _, alg := range []Algorithm{FairTree, Classic} {
		t.Run(string(alg), func(t *testing.T) {
			rows, _ := Compute(tree, alg)
			if len(rows) != len(wantOrder) {
				t.Fatalf("got %d rows, want %d", len(rows), len(wantOrder))
			}
			for i, r := range rows {
				if rowName(r) != wantOrder[i] || r.Depth != wantDepth[i] || r.RawUsage != wantUsage[i] {
					t.Errorf("row %d = %s depth %d usage %v, want %s depth %d usage %v",
						i, rowName(r), r.Depth, r.RawUsage, wantOrder[i], wantDepth[i], wantUsage[i])
				}
				if r.User == "" && alg == FairTree && r.FairShare != 0 {
					t.Errorf("%s: fair tree account FairShare = %v, want 0 (sshare leaves it empty)", rowName(r), r.FairShare)
				}
				if r.User == "" && alg == Classic && r.FairShare != classicFactor(r.EffectvUsage, r.NormShares) {
					t.Errorf("%s: classic account FairShare = %v, want 2^(-UE/S)", rowName(r), r.FairShare)
				}
			}
		})
	}
}

func TestComputeEdges(t *testing.T) {
	tests := map[string]struct {
		tree *Assoc
		rows int
		want map[Key]float64
	}{
		"nil root":          {tree: nil, rows: 0, want: map[Key]float64{}},
		"root only":         {tree: root(), rows: 0, want: map[Key]float64{}},
		"empty account":     {tree: root(acct("A", 1)), rows: 1, want: map[Key]float64{}},
		"nil child skipped": {tree: root(nil, acct("A", 1, user("u", 1, 0))), rows: 2, want: map[Key]float64{{"A", "u"}: 1}},
		// A user leaf with no Account belongs to its parent.
		"user without account": {tree: &Assoc{Account: "root", Children: []*Assoc{
			{Account: "A", Shares: 1, Children: []*Assoc{{User: "u", Shares: 1}}},
		}}, rows: 2, want: map[Key]float64{{"A", "u"}: 1}},
		// Negative and NaN inputs count as 0: u has no share, v no usage.
		"bad numbers are zero": {tree: root(acct("A", 1, user("u", -1, 5), user("v", 1, math.NaN()))),
			rows: 3, want: map[Key]float64{{"A", "u"}: 0, {"A", "v"}: 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, alg := range []Algorithm{FairTree, Classic} {
				rows, factors := Compute(tc.tree, alg)
				if len(rows) != tc.rows {
					t.Errorf("%s: %d rows, want %d", alg, len(rows), tc.rows)
				}
				if alg == FairTree {
					checkFactors(t, factors, tc.want)
				}
				for _, r := range rows {
					for _, v := range []float64{r.NormShares, r.EffectvUsage, r.LevelFS, r.FairShare} {
						if math.IsNaN(v) {
							t.Errorf("%s: %s has NaN: %+v", alg, rowName(r), r)
						}
					}
				}
			}
		})
	}
}

func TestParseAlgorithm(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Algorithm
		wantErr bool
	}{
		"default is fair tree": {in: "", want: FairTree},
		"fairtree":             {in: "fairtree", want: FairTree},
		"classic":              {in: "classic", want: Classic},
		"unknown":              {in: "fair-tree", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAlgorithm(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseAlgorithm(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// randomTree builds a tree of up to four levels below the root with small
// integer shares and usage. Integers keep every sum exact, so a usage
// increase moves each ratio the way the arithmetic says (no rounding
// surprises), and small values make ties frequent.
func randomTree(rng *rand.Rand) *Assoc {
	next := 0
	var grow func(depth int) *Assoc
	grow = func(depth int) *Assoc {
		next++
		a := &Assoc{Account: fmt.Sprintf("acct%d", next), Shares: float64(rng.IntN(4))}
		if rng.IntN(8) != 0 && a.Shares == 0 {
			a.Shares = 1
		}
		for u := range rng.IntN(5) {
			shares := float64(rng.IntN(4))
			if rng.IntN(6) != 0 && shares == 0 {
				shares = 1
			}
			usage := 0.0
			if rng.IntN(3) != 0 {
				usage = float64(rng.IntN(50))
			}
			a.Children = append(a.Children, &Assoc{Account: a.Account, User: fmt.Sprintf("u%d", u), Shares: shares, Usage: usage})
		}
		if depth < 4 {
			for range rng.IntN(4 - depth) {
				a.Children = append(a.Children, grow(depth+1))
			}
		}
		return a
	}
	r := grow(0)
	r.Account, r.Shares = "root", 0
	return r
}

// clone deep-copies a, shuffling every sibling list when rng is not nil.
func clone(a *Assoc, rng *rand.Rand) *Assoc {
	c := *a
	c.Children = make([]*Assoc, len(a.Children))
	for i, k := range a.Children {
		c.Children[i] = clone(k, rng)
	}
	if rng != nil {
		rng.Shuffle(len(c.Children), func(i, j int) { c.Children[i], c.Children[j] = c.Children[j], c.Children[i] })
	}
	return &c
}

func userLeaves(a *Assoc, out []*Assoc) []*Assoc {
	if a.User != "" {
		return append(out, a)
	}
	for _, c := range a.Children {
		out = userLeaves(c, out)
	}
	return out
}

// TestProperties checks invariants over seeded random trees: factors lie in
// [0,1], there is one per user, Compute is deterministic and blind to the
// order of Children, and more usage never raises a user's own factor.
func TestProperties(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		tree := randomTree(rng)
		users := userLeaves(tree, nil)
		for _, alg := range []Algorithm{FairTree, Classic} {
			rows, factors := Compute(tree, alg)
			if len(factors) != len(users) {
				t.Fatalf("seed %d %s: %d factors for %d users", seed, alg, len(factors), len(users))
			}
			for k, f := range factors {
				if !(f >= 0 && f <= 1) {
					t.Fatalf("seed %d %s: %s/%s factor %v outside [0,1]", seed, alg, k.Account, k.User, f)
				}
			}
			for _, r := range rows {
				if !(r.FairShare >= 0 && r.FairShare <= 1) {
					t.Fatalf("seed %d %s: row %s FairShare %v outside [0,1]", seed, alg, rowName(r), r.FairShare)
				}
			}

			rows2, factors2 := Compute(tree, alg)
			if !reflect.DeepEqual(rows, rows2) || !reflect.DeepEqual(factors, factors2) {
				t.Fatalf("seed %d %s: two runs on the same tree differ", seed, alg)
			}
			rows3, factors3 := Compute(clone(tree, rng), alg)
			if !reflect.DeepEqual(rows, rows3) || !reflect.DeepEqual(factors, factors3) {
				t.Fatalf("seed %d %s: shuffling children changed the output", seed, alg)
			}

			if len(users) == 0 {
				continue
			}
			for range 3 {
				bumped := clone(tree, nil)
				bumpedUsers := userLeaves(bumped, nil)
				i := rng.IntN(len(bumpedUsers))
				u := bumpedUsers[i]
				u.Usage += float64(1 + rng.IntN(40))
				_, after := Compute(bumped, alg)
				k := Key{u.Account, u.User}
				// Classic's 2^(-x) can move by rounding alone; allow that.
				slack := 0.0
				if alg == Classic {
					slack = 1e-12
				}
				if after[k] > factors[k]+slack {
					t.Fatalf("seed %d %s: %s/%s usage %v → %v raised its factor %v → %v",
						seed, alg, k.Account, k.User, users[i].Usage, u.Usage, factors[k], after[k])
				}
			}
		}
	}
}

// benchTree is tenants × accounts × users with seeded usage.
func benchTree(tenants, accounts, users int) *Assoc {
	rng := rand.New(rand.NewPCG(1, 2))
	r := root()
	for t := range tenants {
		tn := acct(fmt.Sprintf("t%02d", t), float64(1+rng.IntN(10)))
		for a := range accounts {
			ac := acct(fmt.Sprintf("t%02d-a%02d", t, a), float64(1+rng.IntN(10)))
			for u := range users {
				ac.Children = append(ac.Children, &Assoc{
					Account: ac.Account, User: fmt.Sprintf("u%03d", u),
					Shares: 1, Usage: rng.Float64() * 1e6,
				})
			}
			tn.Children = append(tn.Children, ac)
		}
		r.Children = append(r.Children, tn)
	}
	return r
}

// BenchmarkCompute measures one full computation over 10 tenants × 20
// accounts × 50 users (10,000 users, 10,210 associations).
func BenchmarkCompute(b *testing.B) {
	tree := benchTree(10, 20, 50)
	for _, alg := range []Algorithm{FairTree, Classic} {
		b.Run(fmt.Sprintf("%s/10x20x50", alg), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Compute(tree, alg)
			}
		})
	}
}
