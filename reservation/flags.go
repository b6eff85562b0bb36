package reservation

import (
	"fmt"
	"slices"
	"strings"

	"corral/api"
	"corral/submit"
)

// otherFlags are Slurm's reservation flags corral does not honour, each
// with why: a reservation that takes one would not do what it says.
var otherFlags = map[string]string{
	"ANY_NODES":          "a reservation holds nodes, or CPUs and GPUs on them, not licenses or burst buffers",
	"LICENSE_ONLY":       "a reservation holds nodes, or CPUs and GPUs on them, not licenses",
	"MAGNETIC":           "a job uses a reservation only by naming it (--reservation)",
	"NO_HOLD_JOBS_AFTER": "a job of a reservation that ended waits with reason ReservationDeleted; cancel it or name another",
	"PART_NODES":         "give Nodes=ALL with PartitionName= for all of a partition's nodes",
	"REPLACE":            "corral does not swap nodes into a reservation; for a block that stays the same size give TRES=cpu=N (reusable)",
	"REPLACE_DOWN":       "corral does not swap nodes into a reservation",
	"STATIC_ALLOC":       "corral chooses a reservation's nodes once, when it is created or its nodes change",
	"TIME_FLOAT":         "a reservation starts at its StartTime; to keep long jobs off a node, drain it",
	"USER_DELETE":        "only operators and administrators delete reservations",
	"WEEKDAY":            "corral repeats a window hourly, daily or weekly: give DAILY, or one WEEKLY reservation per day",
	"WEEKEND":            "corral repeats a window hourly, daily or weekly: give WEEKLY reservations for Saturday and Sunday",
	"FIRST_CORES":        "corral chooses which CPUs a job gets inside its VM",
	"NO_HOLD_JOBS":       "a job of a reservation that ended waits with reason ReservationDeleted",
	"DAILY_WEEKLY":       "give one of DAILY and WEEKLY",
}

// Flag is one flag of a Flags= list: its name, whether it is taken away
// (-NAME, on an update), and PURGE_COMP's time in seconds.
type Flag struct {
	Flag   api.ResvFlag
	Remove bool
	Secs   int64
}

// ParseFlags reads a Flags= list: Slurm's flag names in any case,
// comma-separated, each -NAME to take it away, PURGE_COMP[=TIME] with
// sbatch --time's forms.
func ParseFlags(s string) ([]Flag, error) {
	if s == "" {
		return nil, nil
	}
	var out []Flag
	for _, item := range strings.Split(s, ",") {
		var f Flag
		item, f.Remove = strings.CutPrefix(item, "-")
		name, value, hasValue := strings.Cut(item, "=")
		up := strings.ToUpper(name)
		if why, ok := otherFlags[up]; ok {
			return nil, fmt.Errorf("flag %s is not taken: %s", up, why)
		}
		if !slices.Contains(api.ResvFlags, api.ResvFlag(up)) {
			return nil, fmt.Errorf("Invalid flag %q: corral takes %s", name, flagList())
		}
		f.Flag = api.ResvFlag(up)
		if hasValue {
			if f.Flag != api.ResvPurgeComp || f.Remove {
				return nil, fmt.Errorf("flag %s takes no value", up)
			}
			secs, err := submit.ParseTimeLimit(value)
			if err != nil || secs <= 0 {
				return nil, fmt.Errorf("PURGE_COMP=%s: give the idle time in minutes, M:S or H:M:S, e.g. PURGE_COMP=10", value)
			}
			f.Secs = secs
		}
		out = append(out, f)
	}
	return out, nil
}

func flagList() string {
	names := make([]string, len(api.ResvFlags))
	for i, f := range api.ResvFlags {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// applyFlags sets (on a create, or with Flags=) or changes (+=, -=, and
// -NAME items) the reservation's flags. Slurm's update adds the flags
// Flags= names to those in force; so does this one.
func applyFlags(r *api.Reservation, op byte, value string, create bool) error {
	flags, err := ParseFlags(value)
	if err != nil {
		return err
	}
	set := slices.Clone(r.Flags)
	if create {
		set = slices.DeleteFunc(set, func(f api.ResvFlag) bool { return f != api.ResvSpecNodes })
	}
	for _, f := range flags {
		remove := f.Remove || op == '-'
		if remove {
			set = slices.DeleteFunc(set, func(g api.ResvFlag) bool { return g == f.Flag })
			if f.Flag == api.ResvPurgeComp {
				r.PurgeAfter = 0
			}
			continue
		}
		if isRepeat(f.Flag) {
			set = slices.DeleteFunc(set, isRepeat) // one repeat at a time
		}
		if !slices.Contains(set, f.Flag) {
			set = append(set, f.Flag)
		}
		if f.Flag == api.ResvPurgeComp {
			r.PurgeAfter = f.Secs
			if r.PurgeAfter == 0 {
				r.PurgeAfter = api.DefaultPurgeAfter
			}
		}
	}
	slices.SortFunc(set, func(a, b api.ResvFlag) int {
		return slices.Index(api.ResvFlags, a) - slices.Index(api.ResvFlags, b)
	})
	r.Flags = set
	return nil
}

func isRepeat(f api.ResvFlag) bool {
	return f == api.ResvHourly || f == api.ResvDaily || f == api.ResvWeekly
}

// TRES is a TRES= list as a reservation takes it: CPUs, GPUs and a node
// count.
type TRES struct {
	CPUs, GPUs, Nodes int
}

// ParseTRES reads a TRES= list: cpu=N, gres/gpu=N and node=N, comma
// separated, each once. The other TRES (mem, license/..., bb/...) and
// typed GPUs (gres/gpu:a100) are refused with why.
func ParseTRES(s string) (TRES, error) {
	var t TRES
	if s == "" {
		return t, fmt.Errorf("give cpu=N, gres/gpu=N or node=N, e.g. TRES=cpu=64,gres/gpu=4")
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(item, "=")
		name = strings.ToLower(name)
		if !ok {
			return t, fmt.Errorf("%q is not NAME=COUNT; give cpu=N, gres/gpu=N or node=N", item)
		}
		if seen[name] {
			return t, fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		var err error
		switch {
		case name == "cpu":
			t.CPUs, err = count(value, 1, MaxCount)
		case name == "gres/gpu":
			t.GPUs, err = count(value, 1, MaxCount)
		case name == "node":
			t.Nodes, err = count(value, 1, MaxNodes)
		case strings.HasPrefix(name, "gres/gpu:"):
			return t, fmt.Errorf("%s: a reservation holds GPUs of any type; give gres/gpu=N with nodes of the type (Nodes=)", name)
		case name == "mem":
			return t, fmt.Errorf("mem: a reservation's CPUs hold their share of a node's memory; give cpu=N")
		default:
			return t, fmt.Errorf("%s: a reservation holds cpu, gres/gpu or node, not %s", name, name)
		}
		if err != nil {
			return t, fmt.Errorf("%s=%s: %w", name, value, err)
		}
	}
	if t.GPUs > 0 && t.CPUs == 0 {
		return t, fmt.Errorf("gres/gpu=%d needs cpu=N too: a job of the reservation runs on its CPUs", t.GPUs)
	}
	if t.Nodes > 0 && t.CPUs > 0 {
		return t, fmt.Errorf("give whole nodes (node=N) or a block of CPUs and GPUs (cpu=N,gres/gpu=M), not both")
	}
	return t, nil
}

// applyTRES sets a TRES= block: node=N is a node count, cpu and gres/gpu a
// capacity reservation.
func applyTRES(r *api.Reservation, sel *Selection, value string) error {
	t, err := ParseTRES(value)
	if err != nil {
		return err
	}
	sel.Place = true
	if t.Nodes > 0 {
		sel.NodeCnt, r.CPUs, r.GPUs, r.Parts, r.Nodes = t.Nodes, 0, 0, nil, nil
		r.Flags = slices.DeleteFunc(r.Flags, func(f api.ResvFlag) bool { return f == api.ResvSpecNodes })
		return nil
	}
	r.CPUs, r.GPUs = t.CPUs, t.GPUs
	return nil
}
