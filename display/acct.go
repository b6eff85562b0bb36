package display

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// This file renders sacct's output (corral acct): its field names and
// default widths, %N widths, the table with its dashes line, --parsable
// and --parsable2, and the step-like NNN.batch line under each job.

// AcctDefaultFormat is sacct's default --format.
const AcctDefaultFormat = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"

// AcctLine is one line of sacct's output: a job's record, or a step line
// under it (Step set): its batch step, or, with StepID, a step srun ran
// (Rec is then the step's own, made from the job's by AcctLines).
type AcctLine struct {
	Rec    *api.AcctRecord
	Step   bool
	StepID string
}

// AcctEnv is what the lines need beyond the records: the time zone to
// show times in, the cluster's name, and how to look users' and groups'
// numeric ids up (nil: unknown, printed empty).
type AcctEnv struct {
	Loc     *time.Location
	Cluster string
	UID     func(user string) (uid, gid int, group string, ok bool)
}

// acctField is one sacct field: its name as Slurm spells it, its default
// width (negative: left-justified) and its value.
type acctField struct {
	name  string
	width int
	value func(l AcctLine, e *AcctEnv) string
}

// AcctColumn is one column of a parsed --format: a field and its width.
type AcctColumn struct {
	field *acctField
	width int
}

// Name returns the column's field name.
func (c AcctColumn) Name() string { return c.field.name }

var acctFields = []acctField{
	{"JobID", -12, func(l AcctLine, _ *AcctEnv) string { return stepID(l, l.Rec.Ref) }},
	{"JobIDRaw", -12, func(l AcctLine, _ *AcctEnv) string { return stepID(l, strconv.FormatUint(l.Rec.JobID, 10)) }},
	{"JobName", 10, func(l AcctLine, _ *AcctEnv) string {
		if l.StepID != "" {
			return l.Rec.Name
		}
		return ifStep(l, "batch", l.Rec.Name)
	}},
	{"Partition", 10, func(l AcctLine, _ *AcctEnv) string { return ifStep(l, "", l.Rec.Partition) }},
	{"Account", 10, func(l AcctLine, _ *AcctEnv) string { return l.Rec.Account }},
	{"User", 9, func(l AcctLine, _ *AcctEnv) string { return ifStep(l, "", l.Rec.User) }},
	{"UID", 6, func(l AcctLine, e *AcctEnv) string {
		return ids(l, e, func(uid, _ int, _ string) string { return strconv.Itoa(uid) })
	}},
	{"Group", 9, func(l AcctLine, e *AcctEnv) string { return ids(l, e, func(_, _ int, g string) string { return g }) }},
	{"GID", 6, func(l AcctLine, e *AcctEnv) string {
		return ids(l, e, func(_, gid int, _ string) string { return strconv.Itoa(gid) })
	}},
	{"Cluster", 10, func(_ AcctLine, e *AcctEnv) string { return e.Cluster }},
	{"QOS", 10, func(l AcctLine, _ *AcctEnv) string { return ifStep(l, "", l.Rec.QOS) }},
	{"State", 10, func(l AcctLine, _ *AcctEnv) string { return string(l.Rec.State) }},
	{"ExitCode", 8, func(l AcctLine, _ *AcctEnv) string { return fmt.Sprintf("%d:%d", l.Rec.ExitCode, l.Rec.Signal) }},
	{"Submit", 19, func(l AcctLine, e *AcctEnv) string { return acctTime(l.Rec.Submit, e) }},
	{"Eligible", 19, func(l AcctLine, e *AcctEnv) string { return acctTime(l.Rec.Eligible, e) }},
	{"Start", 19, func(l AcctLine, e *AcctEnv) string { return acctTime(l.Rec.Start, e) }},
	{"End", 19, func(l AcctLine, e *AcctEnv) string { return acctTime(l.Rec.End, e) }},
	{"Elapsed", 10, func(l AcctLine, _ *AcctEnv) string { return acctDuration(l.Rec.Elapsed) }},
	{"ElapsedRaw", 10, func(l AcctLine, _ *AcctEnv) string { return strconv.FormatInt(l.Rec.Elapsed, 10) }},
	{"Timelimit", 10, func(l AcctLine, _ *AcctEnv) string {
		switch {
		case l.Step:
			return ""
		case l.Rec.TimeLimit == 0:
			return "UNLIMITED"
		}
		return acctDuration(l.Rec.TimeLimit)
	}},
	{"NNodes", 8, func(l AcctLine, _ *AcctEnv) string {
		return strconv.Itoa(max(l.Rec.AllocTRES.Nodes, nodesIfNone(l.Rec)))
	}},
	{"NCPUS", 10, func(l AcctLine, _ *AcctEnv) string { return strconv.Itoa(ncpus(l.Rec)) }},
	{"AllocCPUS", 10, func(l AcctLine, _ *AcctEnv) string { return strconv.Itoa(l.Rec.AllocTRES.CPU) }},
	{"ReqCPUS", 8, func(l AcctLine, _ *AcctEnv) string { return strconv.Itoa(l.Rec.ReqTRES.CPU) }},
	{"ReqMem", 10, func(l AcctLine, _ *AcctEnv) string { return acctMem(l.Rec.ReqTRES.MemMB) }},
	{"ReqTRES", 10, func(l AcctLine, _ *AcctEnv) string { return ifStep(l, "", TRESString(l.Rec.ReqTRES, 0)) }},
	{"AllocTRES", 10, func(l AcctLine, _ *AcctEnv) string { return TRESString(l.Rec.AllocTRES, l.Rec.BillingRate) }},
	{"NodeList", 15, func(l AcctLine, _ *AcctEnv) string {
		if l.Rec.NodeList == "" {
			return "None assigned"
		}
		return l.Rec.NodeList
	}},
	{"TotalCPU", 10, func(l AcctLine, _ *AcctEnv) string { return acctCPUTime(l.Rec.TotalCPU) }},
	{"MaxRSS", 10, func(l AcctLine, _ *AcctEnv) string {
		if !l.Step || l.Rec.MaxRSSKB == 0 {
			return ""
		}
		return strconv.FormatInt(l.Rec.MaxRSSKB, 10) + "K"
	}},
	{"WorkDir", 30, func(l AcctLine, _ *AcctEnv) string { return ifStep(l, "", l.Rec.WorkDir) }},
	{"Reason", 20, func(l AcctLine, _ *AcctEnv) string {
		if l.Rec.Reason == "" {
			return "None"
		}
		return l.Rec.Reason
	}},
	{"Restarts", 8, func(l AcctLine, _ *AcctEnv) string { return strconv.Itoa(l.Rec.Restarts) }},
}

func stepID(l AcctLine, id string) string {
	switch {
	case l.StepID != "":
		return id + "." + l.StepID
	case l.Step:
		return id + ".batch"
	}
	return id
}

func ifStep(l AcctLine, step, job string) string {
	if l.Step {
		return step
	}
	return job
}

func ids(l AcctLine, e *AcctEnv, f func(uid, gid int, group string) string) string {
	if l.Step || e.UID == nil {
		return ""
	}
	uid, gid, group, ok := e.UID(l.Rec.User)
	if !ok {
		return ""
	}
	return f(uid, gid, group)
}

// nodesIfNone is the node count of a record without a run: what it asked
// for, as sacct shows a job that never started.
func nodesIfNone(r *api.AcctRecord) int {
	if r.AllocID == 0 {
		return r.ReqTRES.Nodes
	}
	return 0
}

func ncpus(r *api.AcctRecord) int {
	if r.AllocID == 0 {
		return r.ReqTRES.CPU
	}
	return r.AllocTRES.CPU
}

// acctTime is a time as sacct prints it; "Unknown" when unset.
func acctTime(t time.Time, e *AcctEnv) string {
	if t.IsZero() {
		return "Unknown"
	}
	loc := e.Loc
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format("2006-01-02T15:04:05")
}

// acctDuration is [D-]HH:MM:SS.
func acctDuration(secs int64) string {
	secs = max(secs, 0)
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	if d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// acctCPUTime is TotalCPU as sacct prints it: MM:SS.mmm under an hour,
// [D-]HH:MM:SS from then on.
func acctCPUTime(secs float64) string {
	if secs >= 3600 {
		return acctDuration(int64(secs))
	}
	ms := int64(math.Round(secs * 1000))
	return fmt.Sprintf("%02d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
}

// acctMem is memory in sacct's units: G when a whole number of GiB, else
// M.
func acctMem(mb int64) string {
	switch {
	case mb == 0:
		return "0"
	case mb%(1024*1024) == 0:
		return strconv.FormatInt(mb/(1024*1024), 10) + "T"
	case mb%1024 == 0:
		return strconv.FormatInt(mb/1024, 10) + "G"
	}
	return strconv.FormatInt(mb, 10) + "M"
}

// TRESString writes a TRES set as Slurm's AllocTRES and ReqTRES do, names
// in order: billing (when billing > 0), cpu, gres/gpu (and gres/gpu:TYPE
// per type), mem, node, and corral's hugepages and VFs.
func TRESString(t api.TRES, billing float64) string {
	var parts []string
	if billing > 0 {
		parts = append(parts, "billing="+strconv.FormatInt(int64(math.Round(billing)), 10))
	}
	if t.CPU > 0 {
		parts = append(parts, "cpu="+strconv.Itoa(t.CPU))
	}
	if n := t.GPUCount(); n > 0 {
		parts = append(parts, "gres/gpu="+strconv.Itoa(n))
		for _, typ := range slices.Sorted(maps.Keys(t.GPUs)) {
			if typ != "" && t.GPUs[typ] > 0 {
				parts = append(parts, "gres/gpu:"+typ+"="+strconv.Itoa(t.GPUs[typ]))
			}
		}
	}
	for _, size := range slices.Sorted(maps.Keys(t.Hugepages)) {
		parts = append(parts, "hugepages/"+size+"k="+strconv.FormatInt(t.Hugepages[size], 10))
	}
	if t.MemMB > 0 {
		parts = append(parts, "mem="+acctMem(t.MemMB))
	}
	if t.Nodes > 0 {
		parts = append(parts, "node="+strconv.Itoa(t.Nodes))
	}
	if t.VFs > 0 {
		parts = append(parts, "vf="+strconv.Itoa(t.VFs))
	}
	return strings.Join(parts, ",")
}

// ParseAcctFormat parses sacct's --format: field names separated by
// commas, in any case, each with an optional %N width ("JobName%30").
func ParseAcctFormat(s string) ([]AcctColumn, error) {
	var out []AcctColumn
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, w, hasWidth := strings.Cut(item, "%")
		f := acctFieldNamed(name)
		if f == nil {
			return nil, fmt.Errorf("--format: unknown field %q; the fields are %s", Safe(name), strings.Join(AcctFieldNames(), ","))
		}
		col := AcctColumn{field: f, width: f.width}
		if hasWidth {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > 1000 {
				return nil, fmt.Errorf("--format: %s: the width %q is not a number from 1 to 1000", f.name, Safe(w))
			}
			if f.width < 0 {
				n = -n
			}
			col.width = n
		}
		out = append(out, col)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--format: name at least one field, e.g. %s", AcctDefaultFormat)
	}
	return out, nil
}

func acctFieldNamed(name string) *acctField {
	for i := range acctFields {
		if strings.EqualFold(acctFields[i].name, name) {
			return &acctFields[i]
		}
	}
	return nil
}

// AcctFieldNames lists the fields --format takes (sacct --helpformat).
func AcctFieldNames() []string {
	out := make([]string, len(acctFields))
	for i, f := range acctFields {
		out[i] = f.name
	}
	return out
}

// AcctLayout is how sacct lays its lines out.
type AcctLayout struct {
	// Parsable separates fields with '|' and ends each line with one
	// (-p); Parsable2 without the last (-P). Neither pads or cuts.
	Parsable, Parsable2 bool
	NoHeader            bool
}

// AcctLines returns the lines sacct prints for recs: each record, and
// under it, unless allocationsOnly (-X) or the record has no run, its
// batch step line (on the run's first node) and a line per step srun ran
// (JOB.0, JOB.1, ...).
func AcctLines(recs []api.AcctRecord, allocationsOnly bool) []AcctLine {
	var out []AcctLine
	for i := range recs {
		r := &recs[i]
		out = append(out, AcctLine{Rec: r})
		if allocationsOnly || r.AllocID == 0 {
			continue
		}
		out = append(out, AcctLine{Rec: batchRecord(r), Step: true})
		for _, st := range r.Steps {
			out = append(out, AcctLine{Rec: stepRecord(r, &st), Step: true, StepID: strconv.Itoa(st.ID)})
		}
	}
	return out
}

// batchRecord is the record of r's batch step: r itself, or, for a run
// on several nodes, what the batch script's node (rank 0) held.
func batchRecord(r *api.AcctRecord) *api.AcctRecord {
	if r.BatchNode == "" {
		return r
	}
	b := *r
	b.NodeList, b.AllocTRES, b.Steps = r.BatchNode, r.BatchTRES, nil
	secs := float64(r.Elapsed)
	b.CPUSeconds, b.MemSeconds = float64(b.AllocTRES.CPU)*secs, float64(b.AllocTRES.MemMB)*secs
	b.GPUSeconds, b.BillingRate, b.Billing = float64(b.AllocTRES.GPUCount())*secs, 0, 0
	return &b
}

// stepRecord is step st of record r as a record of its own, for its line.
func stepRecord(r *api.AcctRecord, st *api.AcctStep) *api.AcctRecord {
	return &api.AcctRecord{
		JobID: r.JobID, Ref: r.Ref, ArrayJobID: r.ArrayJobID, ArrayTaskID: r.ArrayTaskID, AllocID: r.AllocID,
		Name: st.Name, User: r.User, Account: r.Account, Partition: r.Partition, QOS: r.QOS,
		Submit: r.Submit, Eligible: r.Eligible, Start: st.Start, End: st.End, Elapsed: int64(st.End.Sub(st.Start) / time.Second),
		State: st.State, ExitCode: st.ExitCode, Signal: st.Signal, NodeList: st.NodeList,
		ReqTRES: api.TRES{CPU: st.CPUs, Nodes: st.Nodes}, AllocTRES: api.TRES{CPU: st.CPUs, Nodes: st.Nodes},
	}
}

// Acct writes lines in cols as sacct does.
func Acct(w io.Writer, lines []AcctLine, cols []AcctColumn, layout AcctLayout, env AcctEnv) error {
	var b strings.Builder
	parsable := layout.Parsable || layout.Parsable2
	row := func(cell func(c AcctColumn) string, header bool) {
		for i, c := range cols {
			v := Safe(cell(c))
			switch {
			case parsable:
				b.WriteString(v)
				if layout.Parsable || i < len(cols)-1 {
					b.WriteByte('|')
				}
				continue
			case !header:
				v = acctCut(v, absInt(c.width))
			case len(v) > absInt(c.width):
				v = v[:absInt(c.width)]
			}
			if c.width < 0 {
				fmt.Fprintf(&b, "%-*s ", -c.width, v)
			} else {
				fmt.Fprintf(&b, "%*s ", c.width, v)
			}
		}
		b.WriteByte('\n')
	}
	if !layout.NoHeader {
		row(func(c AcctColumn) string { return c.field.name }, true)
		if !parsable {
			for _, c := range cols {
				b.WriteString(strings.Repeat("-", absInt(c.width)))
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
	}
	for _, l := range lines {
		row(func(c AcctColumn) string { return c.field.value(l, &env) }, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// acctCut shortens v to width runes, its last one '+', as sacct does.
func acctCut(v string, width int) string {
	r := []rune(v)
	if len(r) <= width {
		return v
	}
	return string(r[:width-1]) + "+"
}
