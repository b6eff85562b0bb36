package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// JobRowsType is the media type of the compact job listing: one job per
// line, fields separated by tabs, strings escaped. `corral queue` over
// 100,000 jobs spends most of its time decoding; this format decodes an
// order of magnitude faster than JSON. Listings omit scripts and
// environments; dependencies and arrays keep only their raw text.
const JobRowsType = "application/x-corral-jobs"

// jobRowsVersion is the first line of a listing; bump it when fields
// change.
const jobRowsVersion = "corral-jobs 3"

// rowFields is the number of tab-separated fields of a row.
const rowFields = 50

// EncodeJobRows writes jobs in the compact listing format.
func EncodeJobRows(w io.Writer, jobs []*Job) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(jobRowsVersion + "\n")
	buf := make([]byte, 0, 512)
	for _, j := range jobs {
		buf = appendRow(buf[:0], j)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendRow(b []byte, j *Job) []byte {
	s := &j.Spec
	b = strconv.AppendUint(b, j.ID, 10)
	for _, v := range []string{string(j.State), string(j.Reason), string(j.FinalState), s.Name, s.User, s.Account,
		s.Partition, s.QOS, j.Node, s.WorkDir, s.SubmitDir, s.Output, s.Error, s.Comment, j.Message, s.Image,
		depRaw(s.Dependency), arrayRaw(s.Array), gresText(s.Gres)} {
		b = append(b, '\t')
		b = appendEscaped(b, v)
	}
	for _, v := range []int64{int64(j.CPUs), j.MemMB, j.Priority, int64(j.ExitCode), int64(j.Signal),
		int64(j.Restarts), s.TimeLimit, int64(s.NTasks), int64(s.CPUsPerTask), s.MemPerNode, s.MemPerCPU,
		int64(j.SuspendedFor), int64(s.Nice), int64(boolInt(s.Hold) | boolInt(s.Requeue)<<1 |
			boolInt(s.Exclusive)<<2 | boolInt(s.SpreadJob)<<3 | boolInt(s.Contiguous)<<4)} {
		b = append(b, '\t')
		b = strconv.AppendInt(b, v, 10)
	}
	for _, t := range []time.Time{j.SubmitTime, j.StartTime, j.EndTime, s.Begin, j.SuspendTime, j.EstStart} {
		b = append(b, '\t')
		if !t.IsZero() {
			b = strconv.AppendInt(b, t.UnixNano(), 10)
		}
	}
	b = append(b, '\t')
	b = strconv.AppendUint(b, j.ArrayJobID, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(j.ArrayTaskID), 10)
	b = append(b, '\t')
	if j.ArrayPending != nil {
		b = append(b, '[')
		b = append(b, j.ArrayPending.String()...)
	}
	for _, v := range []string{s.Constraint, s.NodeList, s.Exclude, s.Distribution} {
		b = append(b, '\t')
		b = appendEscaped(b, v)
	}
	for _, v := range []int{s.Nodes, s.NodesMax, s.NTasksPerNode} {
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, '\n')
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

func depRaw(d *Dependency) string {
	if d == nil {
		return ""
	}
	return d.Raw
}

func arrayRaw(a *ArraySpec) string {
	if a == nil {
		return ""
	}
	return a.Raw
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 't':
				sb.WriteByte('\t')
			case 'n':
				sb.WriteByte('\n')
			default:
				sb.WriteByte(s[i])
			}
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// DecodeJobRows reads a listing written by EncodeJobRows.
func DecodeJobRows(r io.Reader) ([]Job, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	head, rest, _ := bytes.Cut(data, []byte{'\n'})
	if string(head) != jobRowsVersion {
		return nil, fmt.Errorf("job listing: unknown format %q (want %q): is the controller a newer version?", head, jobRowsVersion)
	}
	jobs := make([]Job, 0, bytes.Count(rest, []byte{'\n'}))
	// One string for the whole body: fields are substrings of it, so a
	// listing costs one allocation for its text.
	body := string(rest)
	var fields [rowFields]string
	for line := 1; len(body) > 0; line++ {
		row, next, _ := strings.Cut(body, "\n")
		body = next
		n := splitTabs(row, fields[:])
		if n != rowFields {
			return nil, fmt.Errorf("job listing line %d: %d fields, want %d", line, n, rowFields)
		}
		var j Job
		if err := decodeRow(&j, fields[:]); err != nil {
			return nil, fmt.Errorf("job listing line %d: %w", line, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func splitTabs(s string, into []string) int {
	n := 0
	for n < len(into) {
		i := strings.IndexByte(s, '\t')
		if i < 0 {
			into[n] = s
			return n + 1
		}
		into[n] = s[:i]
		s = s[i+1:]
		n++
	}
	return n + 1
}

func decodeRow(j *Job, f []string) error {
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return fmt.Errorf("job id %q: %w", f[0], err)
	}
	j.ID = id
	// Fields are substrings of the listing's one string: no copies.
	str := func(i int) string { return unescape(f[i]) }
	s := &j.Spec
	j.State, j.Reason, j.FinalState = JobState(str(1)), Reason(str(2)), JobState(str(3))
	s.Name, s.User, s.Account, s.Partition, s.QOS = str(4), str(5), str(6), str(7), str(8)
	j.Node, s.WorkDir, s.SubmitDir, s.Output, s.Error = str(9), str(10), str(11), str(12), str(13)
	s.Comment, j.Message, s.Image = str(14), str(15), str(16)
	if v := str(17); v != "" {
		s.Dependency = &Dependency{Raw: v}
	}
	if v := str(18); v != "" {
		s.Array = &ArraySpec{Raw: v}
	}
	s.Gres = parseGresText(str(19))
	var nums [14]int64
	for k := range nums {
		var ok bool
		if nums[k], ok = atoi(f[20+k]); !ok {
			return fmt.Errorf("field %d: %q is not a number", 20+k, f[20+k])
		}
	}
	j.CPUs, j.MemMB, j.Priority = int(nums[0]), nums[1], nums[2]
	j.ExitCode, j.Signal, j.Restarts = int(nums[3]), int(nums[4]), int(nums[5])
	s.TimeLimit, s.NTasks, s.CPUsPerTask = nums[6], int(nums[7]), int(nums[8])
	s.MemPerNode, s.MemPerCPU, j.SuspendedFor = nums[9], nums[10], time.Duration(nums[11])
	s.Nice, s.Hold, s.Requeue = int(nums[12]), nums[13]&1 != 0, nums[13]&2 != 0
	s.Exclusive, s.SpreadJob, s.Contiguous = nums[13]&4 != 0, nums[13]&8 != 0, nums[13]&16 != 0
	times := []*time.Time{&j.SubmitTime, &j.StartTime, &j.EndTime, &s.Begin, &j.SuspendTime, &j.EstStart}
	for k, t := range times {
		if v := f[34+k]; v != "" {
			ns, ok := atoi(v)
			if !ok {
				return fmt.Errorf("time field %d: %q is not a number", 34+k, v)
			}
			*t = time.Unix(0, ns)
		}
	}
	arr, ok1 := atoi(f[40])
	task, ok2 := atoi(f[41])
	if !ok1 || !ok2 {
		return fmt.Errorf("array fields %q, %q are not numbers", f[40], f[41])
	}
	j.ArrayJobID, j.ArrayTaskID = uint64(arr), int(task)
	if v, ok := strings.CutPrefix(f[42], "["); ok {
		set, err := ParseIndexSet(v)
		if err != nil {
			return fmt.Errorf("array tasks %q: %w", v, err)
		}
		j.ArrayPending = set
	}
	s.Constraint, s.NodeList, s.Exclude, s.Distribution = str(43), str(44), str(45), str(46)
	var counts [3]int64
	for k := range counts {
		var ok bool
		if counts[k], ok = atoi(f[47+k]); !ok {
			return fmt.Errorf("field %d: %q is not a number", 47+k, f[47+k])
		}
	}
	s.Nodes, s.NodesMax, s.NTasksPerNode = int(counts[0]), int(counts[1]), int(counts[2])
	if s.Array != nil {
		if _, t, ok := strings.Cut(s.Array.Raw, "%"); ok {
			s.Array.Throttle, _ = strconv.Atoi(t)
		}
	}
	return nil
}

// atoi parses a decimal int64 without strconv's error allocation.
func atoi(s string) (int64, bool) {
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// gresText writes gres requests as "name[:type]:count,...".
func gresText(gs []Gres) string {
	var sb strings.Builder
	for i, g := range gs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(g.Name)
		if g.Type != "" {
			sb.WriteByte(':')
			sb.WriteString(g.Type)
		}
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(g.Count))
	}
	return sb.String()
}

func parseGresText(s string) []Gres {
	if s == "" {
		return nil
	}
	var out []Gres
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(item, ":")
		g := Gres{Name: parts[0]}
		if n, ok := atoi(parts[len(parts)-1]); ok && len(parts) > 1 {
			g.Count = int(n)
		}
		if len(parts) == 3 {
			g.Type = parts[1]
		}
		out = append(out, g)
	}
	return out
}
