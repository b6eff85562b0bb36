package display

import (
	"math"
	"strings"
	"testing"

	"corral/api"
)

// shareFixture is a Fair Tree: bio (60 shares, no usage) with carol;
// physics (40) with alice and the sub-account theory with a user whose name
// is longer than sshare's User column.
var shareFixture = []api.ShareRow{
	{Account: "bio", Depth: 0, RawShares: 60, NormShares: 0.6, LevelFSInf: true},
	{Account: "bio", User: "carol", Depth: 1, RawShares: 1, NormShares: 1, LevelFSInf: true, FairShare: 1},
	{Account: "physics", Depth: 0, RawShares: 40, NormShares: 0.4, RawUsage: 123456.7, EffectvUsage: 1, LevelFS: 0.4},
	{Account: "physics", User: "alice", Depth: 1, RawShares: 1, NormShares: 0.5, RawUsage: 100000, EffectvUsage: 0.81, LevelFS: 0.617284, FairShare: 0.5},
	{Account: "theory", Depth: 1, RawShares: 1, NormShares: 0.5, RawUsage: 23456.7, EffectvUsage: 0.19, LevelFS: 2.6315789},
	{Account: "theory", User: "averyverylongname", Depth: 2, RawShares: 1, NormShares: 1, RawUsage: 23456.7, EffectvUsage: 1, LevelFS: 1, FairShare: 0.25},
}

func TestShares(t *testing.T) {
	tests := map[string]struct {
		rows []api.ShareRow
		opts ShareOptions
		want string
	}{
		// Accounts' FairShare is blank under Fair Tree; RawUsage is cut to
		// a whole number; a long user name ends in '+'.
		"default": {shareFixture, ShareOptions{}, `Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare
-------------------- ---------- ---------- ----------- ----------- ------------- ----------
 bio                                    60    0.600000           0      0.000000
  bio                     carol          1    1.000000           0      0.000000   1.000000
 physics                                40    0.400000      123456      1.000000
  physics                 alice          1    0.500000      100000      0.810000   0.500000
  theory                                 1    0.500000       23456      0.190000
   theory            averyvery+          1    1.000000       23456      1.000000   0.250000
`},
		"long adds LevelFS": {shareFixture, ShareOptions{Long: true}, `Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare    LevelFS
-------------------- ---------- ---------- ----------- ----------- ------------- ---------- ----------
 bio                                    60    0.600000           0      0.000000                   inf
  bio                     carol          1    1.000000           0      0.000000   1.000000        inf
 physics                                40    0.400000      123456      1.000000              0.400000
  physics                 alice          1    0.500000      100000      0.810000   0.500000   0.617284
  theory                                 1    0.500000       23456      0.190000              2.631579
   theory            averyvery+          1    1.000000       23456      1.000000   0.250000   1.000000
`},
		"no header": {shareFixture[:1], ShareOptions{NoHeader: true}, ` bio                                    60    0.600000           0      0.000000
`},
		// Classic gives accounts a factor, printed; a fraction of a share
		// keeps its decimals; a LevelFS too wide for "%f" switches to "%e"
		// as print_fields_double does.
		"classic account, wide value": {[]api.ShareRow{{Account: "a", RawShares: 2.5, NormShares: 1, RawUsage: 1e12,
			EffectvUsage: 1, LevelFS: 1234567.5, FairShare: 0.5}}, ShareOptions{Long: true, NoHeader: true},
			` a                                     2.5    1.000000 1000000000000      1.000000   0.500000 1.2346e+06
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := Shares(&b, tc.rows, tc.opts); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestFormatFieldDouble(t *testing.T) {
	tests := map[string]struct {
		v     float64
		width int
		want  string
	}{
		"fits":     {0.5, 10, "0.500000"},
		"exactly":  {123.5, 10, "123.500000"},
		"too wide": {1234567.5, 10, "1.2346e+06"},
		// "%11.11e" is 17 characters, 6 too many, so the precision is 5.
		"wider column": {1234567890.5, 11, "1.23457e+09"},
		"inf":          {math.Inf(1), 10, "inf"},
		"nan":          {math.NaN(), 10, "nan"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := formatFieldDouble(tc.v, tc.width); got != tc.want {
				t.Errorf("formatFieldDouble(%v, %d) = %q, want %q", tc.v, tc.width, got, tc.want)
			}
		})
	}
}
