package display

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/internal/hostlist"
)

// ShowReservation renders one reservation like scontrol show reservation
// (Slurm 22.05's layout), its window the one in force or next, times in
// loc. A capacity reservation adds a line per node with its share (and,
// consumable, what its jobs used up), where Slurm lists core ids.
func ShowReservation(w io.Writer, r *api.ReservationInfo, loc *time.Location) {
	k := &kvWriter{loc: loc}
	k.newLine()
	k.str("ReservationName", r.Name)
	k.time("StartTime", r.Start, "Unknown")
	k.time("EndTime", r.End, "Unknown")
	k.str("Duration", resvDuration(&r.Reservation))
	k.newLine()
	k.str("Nodes", orNull(hostlist.Compress(r.Nodes)))
	k.int("NodeCnt", int64(len(r.Nodes)))
	k.int("CoreCnt", int64(r.CoreCnt))
	k.str("Features", nullStr)
	k.str("PartitionName", orNull(r.Partition))
	k.str("Flags", resvFlags(&r.Reservation))
	for _, p := range r.Parts {
		k.buf = append(k.buf, "\n     "...)
		k.line = 0
		k.str("NodeName", p.Node)
		k.int("CoreCnt", int64(p.CPUs))
		k.str("Mem", strconv.FormatInt(p.MemMB, 10)+"M")
		if p.GPUs > 0 {
			k.str("Gres", "gpu:"+strconv.Itoa(p.GPUs))
		}
		if r.Consumable() {
			k.str("Used", resvTRES(p.UsedCPUs, p.UsedGPUs))
		}
	}
	k.newLine()
	k.str("TRES", resvTRES(r.CoreCnt, r.GPUs))
	k.newLine()
	k.str("Users", orNull(names(r.Users, r.NotUsers)))
	k.str("Groups", nullStr)
	k.str("Accounts", orNull(names(r.Accounts, r.NotAccounts)))
	k.str("Licenses", nullStr)
	k.str("State", resvState(r))
	k.str("BurstBuffer", nullStr)
	k.str("Watts", "n/a")
	k.newLine()
	k.str("MaxStartDelay", nullStr)
	k.done(w)
}

// Reservations renders reservations like sinfo -T: name, state, window,
// duration and nodes, times in loc, with a header unless noHeader. The
// name column is as wide as the longest name, as in Slurm.
func Reservations(w io.Writer, rs []api.ReservationInfo, loc *time.Location, noHeader bool) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "No reservations in the system")
		return err
	}
	width := len("RESV_NAME")
	for _, r := range rs {
		width = max(width, len(Safe(r.Name)))
	}
	var b strings.Builder
	if !noHeader {
		fmt.Fprintf(&b, "%-*s  %8s  %19s  %19s  %11s  %s\n", width, "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST")
	}
	for i := range rs {
		r := &rs[i]
		start := string(appendTime(nil, r.Start, loc, "Unknown"))
		end := string(appendTime(nil, r.End, loc, "Unknown"))
		fmt.Fprintf(&b, "%-*s  %8s  %19s  %19s  %11s  %s\n", width, Safe(r.Name), resvState(r), start, end,
			resvDuration(&r.Reservation), Safe(hostlist.Compress(r.Nodes)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func resvState(r *api.ReservationInfo) string {
	if r.Active {
		return "ACTIVE"
	}
	return "INACTIVE"
}

// resvDuration is a window's length as Slurm shows it (D-HH:MM:SS), or
// UNLIMITED.
func resvDuration(r *api.Reservation) string {
	if r.EndTime.IsZero() {
		return "UNLIMITED"
	}
	return string(appendLongSecs(nil, int64(r.Duration()/time.Second)))
}

// resvFlags writes the flags as Slurm does, PURGE_COMP with its time.
func resvFlags(r *api.Reservation) string {
	parts := make([]string, 0, len(r.Flags))
	for _, f := range r.Flags {
		s := string(f)
		if f == api.ResvPurgeComp && r.PurgeAfter > 0 {
			s += "=" + string(appendLongSecs(nil, r.PurgeAfter))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// resvTRES writes CPUs and GPUs as a TRES list.
func resvTRES(cpus, gpus int) string {
	s := "cpu=" + strconv.Itoa(cpus)
	if gpus > 0 {
		s += ",gres/gpu=" + strconv.Itoa(gpus)
	}
	return s
}

// names writes an allow list, or a deny list as Slurm does: -a,-b.
func names(allow, deny []string) string {
	if len(deny) > 0 {
		return "-" + strings.Join(deny, ",-")
	}
	return strings.Join(allow, ",")
}
