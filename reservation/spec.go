package reservation

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/internal/hostlist"
	"corral/submit"
)

// Keys lists the settings Apply takes, as scontrol names them.
var Keys = []string{"ReservationName", "StartTime", "EndTime", "Duration", "Nodes", "NodeCnt", "PartitionName",
	"Users", "Accounts", "Flags", "TRES", "CoreCnt"}

// refused are scontrol's reservation keys corral does not take, each with
// why: accepting one would make a reservation that does not do what it
// says.
var refused = map[string]string{
	"licenses":      "a reservation holds nodes, or CPUs and GPUs on them (TRES=cpu=N,gres/gpu=M), not licenses",
	"features":      "node features do not exist in corral; name the nodes (Nodes=) or a partition (PartitionName=)",
	"burstbuffer":   "corral has no burst buffers",
	"watts":         "corral has no power management",
	"groups":        "a reservation names users (Users=) and accounts (Accounts=), not Unix groups",
	"maxstartdelay": "corral never lets other jobs delay a reservation's jobs: its resources are held for them",
	"skip":          "delete the reservation and create it again at its next window",
	"tres-per-node": "give the whole block with TRES=cpu=N,gres/gpu=M",
}

// Limits on what one reservation may name.
const (
	// MaxNodes bounds a reservation's nodes (and NodeCnt).
	MaxNodes = 1 << 16
	// MaxNames bounds its users and accounts.
	MaxNames = 1024
	// MaxCount bounds its CPUs and GPUs.
	MaxCount = 1 << 24
	// MaxDuration bounds a window: longer is UNLIMITED.
	MaxDuration = 100 * 365 * 24 * time.Hour
)

// Selection is what Apply leaves to the controllers, which know the
// cluster: which nodes a reservation holds, and its shares of them.
type Selection struct {
	// AllNodes is Nodes=ALL: every node (of the partition, when one is
	// named).
	AllNodes bool
	// NodeCnt is how many whole nodes to choose, from the partition (the
	// default one when none is named); 0 when the nodes are named or the
	// reservation holds a TRES block.
	NodeCnt int
	// Place says the reservation's nodes, or its shares of them, must be
	// chosen again: a setting that decides them changed.
	Place bool
}

// Apply changes r by scontrol's settings, at now, and returns what the
// controllers still have to choose. create says r is new (lists and flags
// are set, not changed with += and -=); on an update only the settings
// given change, and a new StartTime keeps the window's length unless an
// EndTime or Duration comes with it. Keys are read in any case;
// "Reservation" is ReservationName and "Partition" PartitionName. An
// error names the setting and says what to write.
func Apply(r *api.Reservation, settings [][2]string, now time.Time, create bool) (Selection, error) {
	sel := Selection{Place: create}
	var start, end *time.Time
	var dur *time.Duration
	for _, kv := range settings {
		key, value := kv[0], kv[1]
		op := byte('=')
		if n := len(key); n > 0 && (key[n-1] == '+' || key[n-1] == '-') {
			op, key = key[n-1], key[:n-1]
		}
		low := canonicalKey(strings.ToLower(key))
		if why, ok := refused[low]; ok {
			return sel, fmt.Errorf("%s=%s: not taken: %s", key, value, why)
		}
		if op != '=' && low != "users" && low != "accounts" && low != "flags" && low != "nodes" {
			return sel, fmt.Errorf("%s%c=%s: only Users, Accounts, Flags and Nodes take += and -=", key, op, value)
		}
		if op != '=' && create {
			return sel, fmt.Errorf("%s%c=%s: a new reservation's lists are set with %s=, not changed", key, op, value, key)
		}
		var err error
		switch low {
		case "reservationname":
			if r.Name != "" && value != r.Name && !create {
				return sel, fmt.Errorf("%s=%s: a reservation is not renamed; delete it and create it again", key, value)
			}
			r.Name = value
		case "starttime":
			var t time.Time
			if t, err = ParseTime(value, now); err == nil {
				start = &t
			}
		case "endtime":
			var t time.Time
			if t, err = ParseTime(value, now); err == nil {
				end = &t
			}
		case "duration":
			var d time.Duration
			if d, err = ParseDuration(value); err == nil {
				dur = &d
			}
		case "nodes":
			err = applyNodes(r, &sel, op, value)
		case "nodecnt":
			sel.NodeCnt, err = count(value, 1, MaxNodes)
			sel.Place, sel.AllNodes, r.Nodes = true, false, nil
			r.Flags = slices.DeleteFunc(r.Flags, func(f api.ResvFlag) bool { return f == api.ResvSpecNodes })
		case "partitionname":
			r.Partition, sel.Place = value, true
		case "users":
			r.Users, r.NotUsers, err = applyNames(r.Users, r.NotUsers, op, value)
		case "accounts":
			r.Accounts, r.NotAccounts, err = applyNames(r.Accounts, r.NotAccounts, op, value)
		case "flags":
			err = applyFlags(r, op, value, create)
		case "tres":
			err = applyTRES(r, &sel, value)
		case "corecnt":
			r.CPUs, err = count(value, 1, MaxCount)
			sel.Place = true
		default:
			return sel, fmt.Errorf("unknown reservation setting %q (settings: %s)", key, strings.Join(Keys, ", "))
		}
		if err != nil {
			return sel, fmt.Errorf("%s%s: %w", key, opText(op, value), err)
		}
	}
	if r.Capacity() && sel.NodeCnt > 0 {
		return sel, fmt.Errorf("NodeCnt: give whole nodes (NodeCnt=N) or a block of CPUs and GPUs (TRES=cpu=N,gres/gpu=M), not both")
	}
	return sel, applyTimes(r, start, end, dur, create)
}

// keyTargets maps each key's lower-case name, and scontrol's aliases, to
// the name Apply switches on.
var keyTargets = map[string]string{
	"reservationname": "reservationname", "reservation": "reservationname", "starttime": "starttime",
	"endtime": "endtime", "duration": "duration", "nodes": "nodes", "nodecnt": "nodecnt",
	"partitionname": "partitionname", "partition": "partitionname", "users": "users", "accounts": "accounts",
	"flags": "flags", "tres": "tres", "corecnt": "corecnt",
}

// canonicalKey resolves a key as scontrol does: a name, or a prefix of
// exactly one ("user=", "account="). Anything else is returned as it is,
// for the caller's error.
func canonicalKey(low string) string {
	if t, ok := keyTargets[low]; ok {
		return t
	}
	if _, ok := refused[low]; ok || low == "" {
		return low
	}
	found := ""
	for k, t := range keyTargets {
		if strings.HasPrefix(k, low) {
			if found != "" && found != t {
				return low // ambiguous
			}
			found = t
		}
	}
	if found == "" {
		return low
	}
	return found
}

func opText(op byte, value string) string {
	if op == '=' {
		return "=" + value
	}
	return string(op) + "=" + value
}

// count reads a whole number from lo to hi.
func count(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("give a whole number from %d to %d", lo, hi)
	}
	return n, nil
}

// applyTimes sets the window from what was given: a start and an end, or a
// start and a duration (a duration alone keeps the start; a start alone
// keeps the window's length, or on a new reservation needs an end).
func applyTimes(r *api.Reservation, start, end *time.Time, dur *time.Duration, create bool) error {
	length, unlimited := r.Duration(), !r.StartTime.IsZero() && r.EndTime.IsZero()
	if start != nil {
		r.StartTime = *start
	}
	if r.StartTime.IsZero() {
		return fmt.Errorf("StartTime: a reservation needs a start, e.g. StartTime=now or StartTime=2030-01-31T08:00")
	}
	switch {
	case end != nil && dur != nil:
		return fmt.Errorf("give EndTime or Duration, not both")
	case end != nil:
		if !end.After(r.StartTime) {
			return fmt.Errorf("EndTime=%s: it is not after the start %s", end.Format(time.RFC3339), r.StartTime.Format(time.RFC3339))
		}
		r.EndTime = *end
	case dur != nil && *dur == 0:
		r.EndTime = time.Time{}
	case dur != nil:
		r.EndTime = r.StartTime.Add(*dur)
	case create:
		return fmt.Errorf("Duration: a reservation needs an end: give Duration= (e.g. Duration=2:00:00, or UNLIMITED) or EndTime=")
	case start != nil && !unlimited:
		r.EndTime = r.StartTime.Add(length)
	}
	return nil
}

// applyNodes reads Nodes=: a hostlist, or ALL.
func applyNodes(r *api.Reservation, sel *Selection, op byte, value string) error {
	sel.Place, sel.NodeCnt = true, 0
	if strings.EqualFold(value, "ALL") {
		if op != '=' {
			return fmt.Errorf("ALL is set with Nodes=ALL")
		}
		sel.AllNodes, r.Nodes = true, nil
		return nil
	}
	names, err := ParseNodes(value)
	if err != nil {
		return err
	}
	sel.AllNodes = false
	switch op {
	case '+':
		names = append(slices.Clone(r.Nodes), names...)
	case '-':
		names = slices.DeleteFunc(slices.Clone(r.Nodes), func(n string) bool { return slices.Contains(names, n) })
	}
	slices.Sort(names)
	r.Nodes = slices.Compact(names)
	if !slices.Contains(r.Flags, api.ResvSpecNodes) {
		r.Flags = append(r.Flags, api.ResvSpecNodes)
	}
	return nil
}

// ParseNodes reads a node list in Slurm's hostlist form ("n[1-4],gpu7"):
// at least one name, at most MaxNodes, each a valid node name.
func ParseNodes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("give node names, e.g. Nodes=n[1-4] or Nodes=ALL")
	}
	names, err := hostlist.Expand(s, MaxNodes)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%q names no node; give node names, e.g. Nodes=n[1-4]", s)
	}
	if len(names) > MaxNodes {
		return nil, fmt.Errorf("%d nodes: at most %d", len(names), MaxNodes)
	}
	for _, n := range names {
		if !validName(n) {
			return nil, fmt.Errorf("node name %q: use letters, digits, '-', '_' and '.'", n)
		}
	}
	return names, nil
}

// validName reports whether s is a name a reservation may list: a node,
// user or account name of 1 to 64 letters, digits, '-', '_', '.' and '@'.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@') {
			return false
		}
	}
	return true
}

// applyNames reads Users= or Accounts=: names that may use the
// reservation, or, each written -NAME, names that may not (Slurm does not
// mix the two in one list). With += and -= the names are added to or
// taken from the list in force.
func applyNames(allow, deny []string, op byte, value string) ([]string, []string, error) {
	var plain, minus []string
	for _, item := range strings.Split(value, ",") {
		neg := strings.HasPrefix(item, "-")
		name := strings.TrimPrefix(item, "-")
		if !validName(name) {
			return nil, nil, fmt.Errorf("name %q: give names of 1 to 64 letters, digits, '-', '_', '.' and '@', each -NAME to deny it", item)
		}
		if neg {
			minus = append(minus, name)
		} else {
			plain = append(plain, name)
		}
	}
	if len(plain) > 0 && len(minus) > 0 {
		return nil, nil, fmt.Errorf("a list either allows names or denies them (-NAME), not both")
	}
	switch op {
	case '=':
		if len(minus) > 0 {
			allow, deny = nil, minus
		} else {
			allow, deny = plain, nil
		}
	case '+':
		if len(minus) > 0 {
			deny = append(slices.Clone(deny), minus...)
		} else {
			allow = append(slices.Clone(allow), plain...)
		}
	case '-':
		gone := append(plain, minus...)
		drop := func(n string) bool { return slices.Contains(gone, n) }
		allow, deny = slices.DeleteFunc(slices.Clone(allow), drop), slices.DeleteFunc(slices.Clone(deny), drop)
	}
	if len(allow) > 0 && len(deny) > 0 {
		return nil, nil, fmt.Errorf("the list would both allow and deny names; change it with = instead")
	}
	slices.Sort(allow)
	slices.Sort(deny)
	allow, deny = slices.Compact(allow), slices.Compact(deny)
	if len(allow) > MaxNames || len(deny) > MaxNames {
		return nil, nil, fmt.Errorf("at most %d names", MaxNames)
	}
	return allow, deny, nil
}

// ParseTime reads a reservation's StartTime or EndTime: RFC 3339 (what
// the CLI sends, in the user's own zone), or Slurm's forms relative to now
// (submit.ParseBegin): HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]],
// now[+N[units]], today, tomorrow, midnight, noon, fika, teatime.
func ParseTime(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		if t, err = submit.ParseBegin(s, now); err != nil {
			var se *submit.Error
			msg := err.Error()
			if errors.As(err, &se) {
				msg = se.Message
			}
			return time.Time{}, fmt.Errorf("Invalid time specified: %s", strings.ReplaceAll(msg, "--begin", "the time"))
		}
	}
	if t.Year() < 1970 || t.Year() > 9000 {
		return time.Time{}, fmt.Errorf("Invalid time specified: the year %d is outside 1970..9000", t.Year())
	}
	return t.UTC(), nil
}

// ParseDuration reads a reservation's Duration in Slurm's time forms:
// minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S; UNLIMITED or INFINITE is 0
// (no end).
func ParseDuration(s string) (time.Duration, error) {
	secs, err := submit.ParseTimeLimit(s)
	if err != nil {
		var se *submit.Error
		if errors.As(err, &se) {
			return 0, fmt.Errorf("%s", strings.ReplaceAll(se.Message, "--time=", "Duration="))
		}
		return 0, err
	}
	if secs == 0 && !strings.EqualFold(s, "UNLIMITED") && !strings.EqualFold(s, "INFINITE") {
		return 0, fmt.Errorf("a window lasts more than 0: give minutes, H:M:S, D-H:M:S or UNLIMITED")
	}
	d := time.Duration(secs) * time.Second
	if secs < 0 || d > MaxDuration || d/time.Second != time.Duration(secs) {
		return 0, fmt.Errorf("a window lasts at most 100 years; longer is UNLIMITED")
	}
	return d, nil
}
