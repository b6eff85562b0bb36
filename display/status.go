package display

import (
	"io"
	"slices"
	"strconv"
	"strings"

	"corral/api"
)

// Status renders `corral status`: who answered and who leads, the Raft term
// and indexes, a table of controller members, and node and job counts by
// state. States are listed in api order (nodes: idle, mixed, allocated,
// down, drained, draining, unknown; jobs: api.AllJobStates), any other keys
// after them by name, and states with no members are left out.
func Status(w io.Writer, s *api.ClusterStatus) {
	var b []byte
	self := s.Self
	if s.State != "" {
		self += " (" + s.State + ")"
	}
	leader := s.Leader
	if leader == "" {
		leader = "(none)"
	}
	b = appendStatusLine(b, "Member:", self)
	b = appendStatusLine(b, "Leader:", leader)
	b = appendStatusLine(b, "Term:", strconv.FormatUint(s.Term, 10))
	b = appendStatusLine(b, "Index:", "commit="+strconv.FormatUint(s.CommitIndex, 10)+
		" applied="+strconv.FormatUint(s.AppliedIndex, 10)+
		" last="+strconv.FormatUint(s.LastIndex, 10))
	b = append(b, '\n')
	b = appendMembers(b, s.Members)
	b = append(b, '\n')
	nodeOrder := []string{
		string(api.NodeIdle), string(api.NodeMixed), string(api.NodeAllocated), string(api.NodeDown),
		string(api.NodeDrained), string(api.NodeDraining), string(api.NodeUnknown),
	}
	jobOrder := make([]string, len(api.AllJobStates))
	for i, st := range api.AllJobStates {
		jobOrder[i] = string(st)
	}
	b = appendStatusLine(b, "Nodes:", countsByState(s.Nodes, nodeOrder))
	b = appendStatusLine(b, "Jobs:", countsByState(s.Jobs, jobOrder))
	_, _ = w.Write(b)
}

func appendStatusLine(dst []byte, label, value string) []byte {
	dst = appendPadded(dst, label, 8, false, false)
	dst = appendSafe(dst, value)
	return append(dst, '\n')
}

// appendMembers renders the members as a table whose columns are as wide as
// their widest entry.
func appendMembers(dst []byte, members []api.Member) []byte {
	rows := [][]string{{"ID", "RAFT ADDRESS", "HTTP ADDRESS", "ROLE", "VOTER"}}
	for _, m := range members {
		role, voter := "follower", "no"
		if m.Leader {
			role = "leader"
		}
		if m.Voter {
			voter = "yes"
		}
		http := m.HTTPAddr
		if http == "" {
			http = "-"
		}
		rows = append(rows, []string{m.ID, m.RaftAddr, http, role, voter})
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			if i == len(r)-1 {
				dst = appendSafe(dst, c)
				break
			}
			dst = appendPadded(dst, c, widths[i], false, false)
			dst = append(dst, "  "...)
		}
		dst = append(dst, '\n')
	}
	return dst
}

// countsByState renders "12 (pending 4, running 3, completed 5)". Keys
// match order case-insensitively and print in lower case.
func countsByState(counts map[string]int, order []string) string {
	total := 0
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		total += n
		if n != 0 {
			keys = append(keys, k)
		}
	}
	rank := func(k string) int {
		if i := slices.IndexFunc(order, func(o string) bool { return strings.EqualFold(o, k) }); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString(strconv.Itoa(total))
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(strings.ToLower(k))
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(counts[k]))
	}
	if len(keys) > 0 {
		b.WriteByte(')')
	}
	return b.String()
}
