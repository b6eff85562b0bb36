package display

import (
	"errors"
	"strings"
	"testing"
	"time"

	"corral/api"
)

func render(t *testing.T, jobs []api.Job, opts QueueOptions) string {
	t.Helper()
	var b strings.Builder
	if err := Queue(&b, jobs, opts, t0); err != nil {
		t.Fatalf("Queue: %v", err)
	}
	return b.String()
}

var caseRun, casePend, caseFail = runningJob(), pendingJob(), finishedJob()

// fieldValueCases gives every field code's value, unpadded, for a running, a
// pending and a failed job.
var fieldValueCases = map[string]struct {
	job  api.Job
	code string
	want string
}{
	"a account":              {caseRun, "a", "physics"},
	"a account unset":        {casePend, "a", "(null)"},
	"A job id":               {caseRun, "A", "42"},
	"b gres":                 {caseRun, "b", "gres/gpu:a100:2"},
	"b no gres":              {casePend, "b", "N/A"},
	"B exec host":            {caseRun, "B", "gpu01"},
	"B exec host pending":    {casePend, "B", "n/a"},
	"c min cpus":             {caseRun, "c", "4"},
	"C cpus":                 {caseRun, "C", "4"},
	"C cpus from spec":       {casePend, "C", "1"},
	"d tmp disk":             {caseRun, "d", "0"},
	"D nodes":                {caseRun, "D", "1"},
	"e expected end":         {caseRun, "e", "2024-03-01T10:57:57"},
	"e end of finished":      {caseFail, "e", "2024-03-01T09:00:30"},
	"e pending":              {casePend, "e", "N/A"},
	"E dependency":           {caseRun, "E", "afterok:41"},
	"E no dependency":        {casePend, "E", "(null)"},
	"f features":             {caseRun, "f", "(null)"},
	"F array job id":         {caseRun, "F", "42"},
	"h oversubscribe":        {caseRun, "h", "OK"},
	"H sockets":              {caseRun, "H", "*"},
	"i job id":               {caseRun, "i", "42"},
	"I cores":                {caseRun, "I", "*"},
	"j name":                 {caseRun, "j", "train.sh"},
	"J threads":              {caseRun, "J", "*"},
	"k comment":              {caseRun, "k", "nightly"},
	"k no comment":           {casePend, "k", "(null)"},
	"K array task id":        {caseRun, "K", "N/A"},
	"l time limit":           {caseRun, "l", "2:00:00"},
	"l unlimited":            {casePend, "l", "UNLIMITED"},
	"l minutes":              {caseFail, "l", "10:00"},
	"L time left":            {caseRun, "L", "57:57"},
	"L finished job":         {caseFail, "L", "9:30"},
	"L unlimited":            {casePend, "L", "UNLIMITED"},
	"m memory":               {caseRun, "m", "1.50G"},
	"m memory per cpu":       {caseFail, "m", "500M"},
	"m no memory":            {casePend, "m", "0"},
	"M time":                 {caseRun, "M", "1:02:03"},
	"M pending":              {casePend, "M", "0:00"},
	"M finished":             {caseFail, "M", "0:30"},
	"n req nodes":            {caseRun, "n", ""},
	"N nodelist":             {caseRun, "N", "gpu01"},
	"N pending":              {casePend, "N", ""},
	"o command":              {caseRun, "o", "/home/alice/run/train.sh"},
	"O contiguous":           {caseRun, "O", "0"},
	"p priority fraction":    {caseRun, "p", "0.50000000011642"},
	"P partition":            {caseRun, "P", "gpu"},
	"P default partition":    {casePend, "P", "batch"},
	"q qos":                  {caseRun, "q", "high"},
	"q no qos":               {casePend, "q", "(null)"},
	"Q priority":             {caseRun, "Q", "2147483648"},
	"r reason running":       {caseRun, "r", "None"},
	"r reason pending":       {casePend, "r", "Priority"},
	"r reason failed":        {caseFail, "r", "NonZeroExitCode"},
	"R nodes":                {caseRun, "R", "gpu01"},
	"R pending reason":       {casePend, "R", "(Priority)"},
	"R failed reason":        {caseFail, "R", "(NonZeroExitCode)"},
	"S start":                {caseRun, "S", "2024-03-01T08:57:57"},
	"S pending":              {casePend, "S", "N/A"},
	"t short state":          {caseRun, "t", "R"},
	"t short state pending":  {casePend, "t", "PD"},
	"T state":                {caseFail, "T", "FAILED"},
	"u user":                 {caseRun, "u", "alice"},
	"v reservation":          {caseRun, "v", "(null)"},
	"V submit":               {caseRun, "V", "2024-03-01T08:00:00"},
	"w wckey":                {caseRun, "w", "(null)"},
	"W licenses":             {caseRun, "W", "(null)"},
	"x excluded nodes":       {caseRun, "x", ""},
	"X core spec":            {caseRun, "X", "N/A"},
	"y nice":                 {caseRun, "y", "10"},
	"Y schednodes":           {caseRun, "Y", "(null)"},
	"z sockets cores thread": {caseRun, "z", "*:*:*"},
	"Z work dir":             {caseRun, "Z", "/home/alice/run"},
}

func TestQueueFieldValues(t *testing.T) {
	for name, tc := range fieldValueCases {
		t.Run(name, func(t *testing.T) {
			got := render(t, []api.Job{tc.job}, QueueOptions{Format: "%" + tc.code, NoHeader: true})
			if got != tc.want+"\n" {
				t.Errorf("%%%s = %q, want %q", tc.code, got, tc.want+"\n")
			}
		})
	}
}

func TestQueueHeaders(t *testing.T) {
	tests := map[string]string{
		"a": "ACCOUNT", "A": "JOBID", "b": "TRES_PER_NODE", "B": "EXEC_HOST", "c": "MIN_CPUS",
		"C": "CPUS", "d": "MIN_TMP_DISK", "D": "NODES", "e": "END_TIME", "E": "DEPENDENCY",
		"f": "FEATURES", "F": "ARRAY_JOB_ID", "h": "OVER_SUBSCRIBE", "H": "SOCKETS_PER_NODE",
		"i": "JOBID", "I": "CORES_PER_SOCKET", "j": "NAME", "J": "THREADS_PER_CORE", "k": "COMMENT",
		"K": "ARRAY_TASK_ID", "l": "TIME_LIMIT", "L": "TIME_LEFT", "m": "MIN_MEMORY", "M": "TIME",
		"n": "REQ_NODES", "N": "NODELIST", "o": "COMMAND", "O": "CONTIGUOUS", "p": "PRIORITY",
		"P": "PARTITION", "q": "QOS", "Q": "PRIORITY", "r": "REASON", "R": "NODELIST(REASON)",
		"S": "START_TIME", "t": "ST", "T": "STATE", "u": "USER", "v": "RESERVATION",
		"V": "SUBMIT_TIME", "w": "WCKEY", "W": "LICENSES", "x": "EXC_NODES", "X": "CORE_SPEC",
		"y": "NICE", "Y": "SCHEDNODES", "z": "S:C:T", "Z": "WORK_DIR",
	}
	if len(tests) != len(validCodes) {
		t.Fatalf("%d header cases for %d codes", len(tests), len(validCodes))
	}
	for code, want := range tests {
		t.Run(code, func(t *testing.T) {
			got := render(t, nil, QueueOptions{Format: "%" + code})
			if got != want+"\n" {
				t.Errorf("header of %%%s = %q, want %q", code, got, want)
			}
		})
	}
}

func TestQueueDefaultFormat(t *testing.T) {
	tests := map[string]struct {
		jobs []api.Job
		opts QueueOptions
		want string
	}{
		"header only": {
			want: "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n",
		},
		"pending and running": {
			jobs: []api.Job{runningJob(), pendingJob()},
			want: "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n" +
				"                42       gpu train.sh    alice  R    1:02:03      1 gpu01\n" +
				"                12     batch      sim      bob PD       0:00      1 (Priority)\n",
		},
		"no header": {
			jobs: []api.Job{pendingJob()},
			opts: QueueOptions{NoHeader: true},
			want: "                12     batch      sim      bob PD       0:00      1 (Priority)\n",
		},
		"long": {
			jobs: []api.Job{runningJob()},
			opts: QueueOptions{Long: true},
			want: "Fri Mar  1 10:00:00 2024\n" +
				"             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)\n" +
				"                42       gpu train.sh    alice  RUNNING    1:02:03   2:00:00      1 gpu01\n",
		},
		"long without header has no date": {
			jobs: []api.Job{pendingJob()},
			opts: QueueOptions{Long: true, NoHeader: true},
			want: "                12     batch      sim      bob  PENDING       0:00 UNLIMITED      1 (Priority)\n",
		},
		"start shows pending jobs only": {
			jobs: []api.Job{runningJob(), pendingJob()},
			opts: QueueOptions{Start: true},
			want: "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)\n" +
				"                12     batch      sim      bob PD                 N/A      1 (null)               (Priority)\n",
		},
		"format overrides long": {
			jobs: []api.Job{pendingJob()},
			opts: QueueOptions{Format: "%i %t", Long: true},
			want: "Fri Mar  1 10:00:00 2024\nJOBID ST\n12 PD\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := render(t, tc.jobs, tc.opts); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestQueueWidthAndJustification(t *testing.T) {
	run, pend := runningJob(), pendingJob()
	long := pendingJob()
	long.Spec.Name = "日本語のジョブ"
	tests := map[string]struct {
		job    api.Job
		format string
		want   string
	}{
		"left pads right":             {run, "%10j|", "train.sh  |"},
		"explicit left":               {run, "%-10j|", "train.sh  |"},
		"dot right-justifies":         {run, "%.10j|", "  train.sh|"},
		"left truncates":              {run, "%5j|", "train|"},
		"right truncates":             {run, "%.5j|", "train|"},
		"exact width":                 {run, "%.8j|", "train.sh|"},
		"right time is never cut":     {run, "%.3M|", "1:02:03|"},
		"left time is cut by printf":  {run, "%3M|", "1:0|"},
		"right nodelist is never cut": {run, "%.3N|", "gpu01|"},
		"right node of %R is not cut": {run, "%.3R|", "gpu01|"},
		"right reason of %R is cut":   {pend, "%.5R|", "(Prio|"},
		"runes, not bytes":            {long, "%.4j|", "日本語の|"},
		"runes pad":                   {long, "%.9j|", "  日本語のジョブ|"},
		"literal text and prefix":     {run, "job=%i name=%j", "job=42 name=train.sh"},
		"percent literal":             {run, "%i%%", "42%"},
		"dot then dash is left":       {run, "%.-10j|", "train.sh  |"},
		"zero width is unpadded":      {run, "%0j|", "train.sh|"},
		"priority fraction is 16":     {pend, "%p|", "0.00000002328306|"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := render(t, []api.Job{tc.job}, QueueOptions{Format: tc.format, NoHeader: true})
			if got != tc.want+"\n" {
				t.Errorf("%q = %q, want %q", tc.format, got, tc.want+"\n")
			}
		})
	}
}

func TestQueueHeaderTruncation(t *testing.T) {
	tests := map[string]struct{ format, want string }{
		"right cut":                {"%.4T", "STAT"},
		"left cut":                 {"%4T", "STAT"},
		"nodelist header right":    {"%.4N", "NODELIST"},
		"nodelist header left":     {"%4N", "NODE"},
		"reason list header right": {"%.3R", "NODELIST(REASON)"},
		"padded":                   {"%.7t", "     ST"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := render(t, nil, QueueOptions{Format: tc.format}); got != tc.want+"\n" {
				t.Errorf("%q header = %q, want %q", tc.format, got, tc.want)
			}
		})
	}
}

func TestParseQueueFormatErrors(t *testing.T) {
	tests := map[string]struct {
		format string
		want   []string
	}{
		"unknown code":         {"%i %g", []string{`"%g"`, "group", "valid codes", "%a", "%Z"}},
		"unknown code letter":  {"%!", []string{`"%!"`, "valid codes"}},
		"ends after percent":   {"%i %", []string{"ends inside a field", "valid codes"}},
		"ends after width":     {"%.10", []string{"ends inside a field"}},
		"width too large":      {"%99999i", []string{"wider than"}},
		"non-ascii after code": {"%é", []string{"unknown field code"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseQueueFormat(tc.format)
			if err == nil {
				t.Fatalf("ParseQueueFormat(%q) succeeded", tc.format)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if qerr := Queue(&strings.Builder{}, nil, QueueOptions{Format: tc.format}, t0); qerr == nil {
				t.Errorf("Queue accepted %q", tc.format)
			}
		})
	}
}

func TestQueueDurations(t *testing.T) {
	tests := map[string]struct {
		secs int64
		want string
	}{
		"zero":          {0, "0:00"},
		"seconds":       {59, "0:59"},
		"minutes":       {61, "1:01"},
		"hours":         {3600, "1:00:00"},
		"days":          {86400 + 3661, "1-01:01:01"},
		"a year":        {yearSeconds, "365-00:00:00"},
		"over a year":   {yearSeconds + 1, "INVALID"},
		"negative left": {-1, "INVALID"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := string(appendSqueueSecs(nil, tc.secs)); got != tc.want {
				t.Errorf("appendSqueueSecs(%d) = %q, want %q", tc.secs, got, tc.want)
			}
		})
	}
}

func TestMemoryUnits(t *testing.T) {
	tests := map[string]struct {
		mb   int64
		want string
	}{
		"zero":         {0, "0"},
		"megabytes":    {500, "500M"},
		"not exact":    {1500, "1500M"},
		"one gig":      {1024, "1G"},
		"half gig":     {1536, "1.50G"},
		"terabyte":     {1024 * 1024, "1T"},
		"big not even": {1025, "1025M"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := string(appendMemMB(nil, tc.mb)); got != tc.want {
				t.Errorf("appendMemMB(%d) = %q, want %q", tc.mb, got, tc.want)
			}
		})
	}
}

func TestQueueSuspendedAndRequeued(t *testing.T) {
	susp := runningJob()
	susp.State = api.StateSuspended
	susp.SuspendTime = t0.Add(-2 * time.Minute)
	req := runningJob()
	req.State = api.StateRequeued
	req.Reason = api.ReasonResources
	tests := map[string]struct {
		job  api.Job
		want string
	}{
		"suspended clock stops": {susp, "S|1:00:03|gpu01"},
		"requeued is pending":   {req, "RQ|0:00|(Resources)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := render(t, []api.Job{tc.job}, QueueOptions{Format: "%t|%M|%R", NoHeader: true})
			if got != tc.want+"\n" {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQueueWriteErrors(t *testing.T) {
	jobs := make([]api.Job, 2000)
	for i := range jobs {
		jobs[i] = pendingJob()
	}
	err := Queue(failingWriter{}, jobs, QueueOptions{}, t0)
	if !errors.Is(err, errWrite) {
		t.Fatalf("Queue to a failing writer = %v, want %v", err, errWrite)
	}
	var cw countingWriter
	if err := Queue(&cw, jobs, QueueOptions{}, t0); err != nil {
		t.Fatal(err)
	}
	// An 85-byte header, then 79 bytes a row.
	if want := 85 + 79*len(jobs); cw.writes < 2 || cw.bytes != want {
		t.Errorf("%d writes of %d bytes, want several chunks of %d bytes", cw.writes, cw.bytes, want)
	}
}

func TestQueueTimesUseNowsLocation(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	var b strings.Builder
	if err := Queue(&b, []api.Job{runningJob()}, QueueOptions{Format: "%V %S", NoHeader: true}, t0.In(loc)); err != nil {
		t.Fatal(err)
	}
	if want := "2024-03-01T09:00:00 2024-03-01T09:57:57\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestQueueRowsDoNotAllocate pins the performance design: after the buffer
// exists, rendering rows allocates nothing.
func TestQueueRowsDoNotAllocate(t *testing.T) {
	jobs := benchJobs(5000)
	allocs := testing.AllocsPerRun(5, func() {
		_ = Queue(&countingWriter{}, jobs, QueueOptions{}, t0)
	})
	if allocs > 20 {
		t.Errorf("Queue of 5000 jobs made %v allocations, want a handful", allocs)
	}
}

// TestQueueNodeRequest checks the fields of a multi-node request: %D the
// fewest nodes, %f the constraint, %n the -w list, %h and %O.
func TestQueueNodeRequest(t *testing.T) {
	j := pendingJob()
	j.Spec.Nodes, j.Spec.NodesMax, j.Spec.NTasks, j.Spec.NTasksPerNode = 3, 5, 0, 1
	j.Spec.Constraint, j.Spec.NodeList, j.Spec.Exclusive, j.Spec.Contiguous = "intel&ib", "n[1-2]", true, true
	var b strings.Builder
	if err := Queue(&b, []api.Job{j, pendingJob()}, QueueOptions{Format: "%D|%f|%n|%h|%O", NoHeader: true}, t0); err != nil {
		t.Fatal(err)
	}
	if want := "3|intel&ib|n[1-2]|NO|1\n1|(null)||OK|0\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
