package display

import (
	"io"
	"strconv"
	"strings"

	"corral/api"
)

// ShareOptions choose what Shares prints.
type ShareOptions struct {
	// Long adds the LevelFS column (sshare -l).
	Long bool
	// NoHeader leaves out the header and dash lines (sshare -n).
	NoHeader bool
}

// Shares renders `corral share` (sshare) in print_fields layout, one line
// per row in the order given. The Account column is indented by one space
// per level as sshare indents it under its root line: the root's accounts
// (Depth 0) by one space, their accounts and users by two, and so on. A
// user's line repeats its account's name and fills the User column.
// NormShares, EffectvUsage, FairShare and LevelFS print with six decimals
// ("%f", switching to "%e" when that overflows the column, as
// print_fields_double does); RawUsage is cut to a whole number as sshare's
// uint64 is. An account's FairShare is left blank when it is 0, as sshare
// leaves it under Fair Tree (where only users have a factor); LevelFS is
// "inf" for a row with shares and no usage.
//
// The server sends no root line, so none is printed.
func Shares(w io.Writer, rows []api.ShareRow, opts ShareOptions) error {
	fields := []field{
		{"Account", -20, true}, {"User", 10, true}, {"RawShares", 10, false}, {"NormShares", 11, false},
		{"RawUsage", 11, false}, {"EffectvUsage", 13, false}, {"FairShare", 10, false},
	}
	if opts.Long {
		fields = append(fields, field{"LevelFS", 10, false})
	}
	t := &fieldsTable{fields: fields}
	if !opts.NoHeader {
		t.header()
	}
	for i := range rows {
		t.row(shareCells(&rows[i], opts.Long)...)
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

func shareCells(r *api.ShareRow, long bool) []string {
	fairShare := formatFieldDouble(r.FairShare, 10)
	if r.User == "" && r.FairShare == 0 {
		fairShare = ""
	}
	cells := []string{
		strings.Repeat(" ", r.Depth+1) + r.Account,
		r.User,
		formatShares(r.RawShares),
		formatFieldDouble(r.NormShares, 11),
		strconv.FormatUint(uint64(max(r.RawUsage, 0)), 10),
		formatFieldDouble(r.EffectvUsage, 13),
		fairShare,
	}
	if long {
		levelFS := formatFieldDouble(r.LevelFS, 10)
		if r.LevelFSInf {
			levelFS = "inf"
		}
		cells = append(cells, levelFS)
	}
	return cells
}
