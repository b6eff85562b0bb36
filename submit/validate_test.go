package submit

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// goodSpec is a request ValidateSpec accepts; each case below breaks one
// rule of it.
func goodSpec() api.JobSpec {
	return api.JobSpec{
		Name: "job.sh", User: "alice", Script: "#!/bin/sh\necho hi\n",
		SubmitDir: "/home/alice", WorkDir: "/home/alice", NTasks: 1, CPUsPerTask: 1,
		Env: []string{"HOME=/home/alice", "BASH_FUNC_f%%=() { echo; }"},
	}
}

var validateNow = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// badSpecs are requests ValidateSpec must refuse, by class of rule, with
// the field the error names and part of its message.
var badSpecs = map[string]struct {
	edit  func(s *api.JobSpec)
	field string
	want  string
}{
	// Counts and their product.
	"ntasks 0":                  {func(s *api.JobSpec) { s.NTasks = 0 }, "ntasks", "--ntasks must be between 1 and 1000000"},
	"ntasks negative":           {func(s *api.JobSpec) { s.NTasks = -5 }, "ntasks", `ntasks "-5"`},
	"cpus_per_task 0":           {func(s *api.JobSpec) { s.CPUsPerTask = 0 }, "cpus_per_task", "--cpus-per-task must be between 1"},
	"cpus product overflows":    {func(s *api.JobSpec) { s.NTasks, s.CPUsPerTask = 1<<20-1, 1<<20 }, "ntasks", "between 1 and 1000000"},
	"cpus product too large":    {func(s *api.JobSpec) { s.NTasks, s.CPUsPerTask = 1000, 1001 }, "cpus_per_task", "1000 × 1001 CPUs"},
	"ntasks MaxInt":             {func(s *api.JobSpec) { s.NTasks, s.CPUsPerTask = math.MaxInt, math.MaxInt }, "ntasks", "between 1"},
	"nodes negative":            {func(s *api.JobSpec) { s.Nodes = -5 }, "nodes", "--nodes must be between 1 and 100000"},
	"nodes too many":            {func(s *api.JobSpec) { s.Nodes, s.NTasks = 100_001, 100_001 }, "nodes", "--nodes must be between 1 and 100000"},
	"nodes over tasks":          {func(s *api.JobSpec) { s.Nodes = 2 }, "ntasks", "every node runs a task at least"},
	"nodes_max below nodes":     {func(s *api.JobSpec) { s.Nodes, s.NodesMax, s.NTasks = 3, 2, 3 }, "nodes_max", "MAX must be between MIN (3)"},
	"nodes_max too many":        {func(s *api.JobSpec) { s.NodesMax = 100_001 }, "nodes_max", "and 100000"},
	"ntasks 0 without per node": {func(s *api.JobSpec) { s.NTasks = 0 }, "ntasks", "or 0 with ntasks_per_node"},
	"ntasks_per_node negative":  {func(s *api.JobSpec) { s.NTasksPerNode = -1 }, "ntasks_per_node", "between 1 and 1000000 CPUs"},
	"ntasks_per_node × cpus":    {func(s *api.JobSpec) { s.NTasksPerNode, s.CPUsPerTask = 1000, 1001 }, "ntasks_per_node", "between 1 and 1000000 CPUs"},
	"per node × nodes_max": {func(s *api.JobSpec) { s.NTasks, s.NTasksPerNode, s.NodesMax = 0, 100_000, 100_000 }, "ntasks_per_node",
		"100000 nodes × 100000 tasks × 1 CPUs: the most a job may ask for is 1000000 tasks"},
	"tasks over nodes × per node": {func(s *api.JobSpec) { s.NTasks, s.NTasksPerNode, s.Nodes = 9, 4, 2 }, "ntasks", "9 tasks do not fit on 2 nodes of 4 tasks"},
	"distribution":                {func(s *api.JobSpec) { s.Distribution = "plane" }, "distribution", "use block or cyclic"},
	"nodelist syntax":             {func(s *api.JobSpec) { s.NodeList = "n[1-" }, "nodelist", "never closed"},
	"nodelist name":               {func(s *api.JobSpec) { s.NodeList = "../x" }, "nodelist", "not a host list"},
	"nodelist repeated":           {func(s *api.JobSpec) { s.NodeList, s.Nodes, s.NTasks = "n1,n2,n1", 3, 3 }, "nodelist", "names node n1 twice"},
	"nodelist over nodes":         {func(s *api.JobSpec) { s.NodeList = "n[1-2]" }, "nodelist", "names 2 nodes, but the job may have at most 1"},
	"nodelist huge":               {func(s *api.JobSpec) { s.NodeList = "n[0-99999999999]" }, "nodelist", "a job has at most 100000 nodes"},
	"exclude syntax":              {func(s *api.JobSpec) { s.Exclude = "n]" }, "exclude", "closes no"},
	"exclude overlaps":            {func(s *api.JobSpec) { s.NodeList, s.Exclude = "n1", "n[1-2]" }, "exclude", "node n1 is both"},
	"constraint syntax":           {func(s *api.JobSpec) { s.Constraint = "a&&b" }, "constraint", "at byte 2"},
	"constraint count":            {func(s *api.JobSpec) { s.Constraint = "[a*2&b*2]"; s.NodesMax = 3 }, "constraint", "its counts need 4 nodes"},

	// Notifications.
	"mail type unknown":    {func(s *api.JobSpec) { s.MailType = []string{"BEGAN"} }, "mail_type", `unknown mail type "BEGAN"`},
	"mail type twice":      {func(s *api.JobSpec) { s.MailType = []string{"END", "END"} }, "mail_type", "given twice"},
	"mail user option":     {func(s *api.JobSpec) { s.MailUser = "-t" }, "mail_user", "must not start with '-'"},
	"mail user with space": {func(s *api.JobSpec) { s.MailUser = "a b@c" }, "mail_user", "may hold only letters"},

	// Memory.
	"mem negative":         {func(s *api.JobSpec) { s.MemPerNode = -1 }, "mem_per_node_mb", "between 1 and 1099511627776 MiB"},
	"mem too large":        {func(s *api.JobSpec) { s.MemPerNode = 1<<40 + 1 }, "mem_per_node_mb", "1 EiB"},
	"mem per cpu × cpus":   {func(s *api.JobSpec) { s.MemPerCPU, s.NTasks = 1<<39, 4 }, "mem_per_cpu_mb", "× 4 CPUs is more than"},
	"mem and mem per cpu":  {func(s *api.JobSpec) { s.MemPerNode, s.MemPerCPU = 1, 1 }, "mem_per_cpu_mb", "mutually exclusive"},
	"mem per cpu MinInt64": {func(s *api.JobSpec) { s.MemPerCPU = math.MinInt64 }, "mem_per_cpu_mb", "between 1 and"},
	"time limit 2^63-1":    {func(s *api.JobSpec) { s.TimeLimit = math.MaxInt64 }, "time_limit_s", "100 years"},
	"time limit negative":  {func(s *api.JobSpec) { s.TimeLimit = -1 }, "time_limit_s", "between 1 and 3153600000 seconds"},
	"begin before 1970":    {func(s *api.JobSpec) { s.Begin = time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC) }, "begin", "after 1970"},
	"begin in 11 years":    {func(s *api.JobSpec) { s.Begin = validateNow.AddDate(11, 0, 0) }, "begin", "at most 10 years ahead"},
	"nice -2^63":           {func(s *api.JobSpec) { s.Nice = math.MinInt }, "nice", "between -10000 and 10000"},
	"nice 10001":           {func(s *api.JobSpec) { s.Nice = 10001 }, "nice", "between -10000 and 10000"},
	"gres negative count":  {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: -5}} }, "gres", `gres "gpu:-5": the count must be between 1 and 1000000`},
	"gres zero count":      {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "vf", Count: 0}} }, "gres", "between 1"},
	"gres unknown name":    {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "fpga", Count: 1}} }, "gres", `unknown generic resource "fpga"`},
	"gres bad type":        {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Type: "../x", Count: 1}} }, "gres", "type"},
	"gres listed twice":    {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: 1}, {Name: "gpu", Count: 2}} }, "gres", "listed twice"},
	"gres vf with a type":  {func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "vf", Type: "x", Count: 1}} }, "gres", "vf takes no type"},
	"hugepages negative":   {func(s *api.JobSpec) { s.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: -1}} }, "hugepages", "between 1 and"},
	"hugepages 3M":         {func(s *api.JobSpec) { s.Hugepages = []api.HugepageRequest{{SizeKB: 3072, Count: 1}} }, "hugepages", "2M (size_kb 2048) or 1G"},
	"hugepages too many":   {func(s *api.JobSpec) { s.Hugepages = []api.HugepageRequest{{SizeKB: 1 << 20, Count: 1<<40 + 1}} }, "hugepages", "between 1 and 1073741824 pages"},
	"hugepages size twice": {func(s *api.JobSpec) {
		s.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: 1}, {SizeKB: 2048, Count: 2}}
	}, "hugepages", "listed twice"},
	"numa unknown":          {func(s *api.JobSpec) { s.NUMA = "sometimes" }, "numa", "use prefer, strict or none"},
	"numa in capitals":      {func(s *api.JobSpec) { s.NUMA = "STRICT" }, "numa", "use prefer"},
	"array 10-5":            {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(10, 5, 1))} }, "array", "the last index is below the first"},
	"array step 0":          {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(0, 5, 0))} }, "array", "the step 0 must be between 1"},
	"array step negative":   {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(0, 5, -1))} }, "array", "the step -1"},
	"array index negative":  {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(-1, 5, 1))} }, "array", "indexes must be 0 to 1000000"},
	"array huge overlap":    {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(0, 1<<40, 1), rng(1, 2, 1))} }, "array", "indexes must be 0 to"},
	"array no ranges":       {func(s *api.JobSpec) { s.Array = &api.ArraySpec{} }, "array", "names no task"},
	"array throttle < 0":    {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: ranges(rng(0, 5, 1)), Throttle: -1} }, "array", "task limit"},
	"array raw disagrees":   {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Raw: "0-9", Ranges: ranges(rng(0, 5, 1))} }, "array", "does not say what the ranges say"},
	"array too many ranges": {func(s *api.JobSpec) { s.Array = &api.ArraySpec{Ranges: make([]api.ArrayRange, MaxArrayRanges+1)} }, "array", "10001 ranges"},
	"array interleaves": {func(s *api.JobSpec) {
		s.Array = &api.ArraySpec{Ranges: ranges(rng(0, 1_000_000, 2), rng(1, 1_000_000, 3))}
	}, "array", "interleave on different steps"},

	// Dependencies.
	"dependency unknown type":   {func(s *api.JobSpec) { s.Dependency = dep("afterwards", "1") }, "dependency", `unknown dependency type "afterwards"`},
	"dependency no clauses":     {func(s *api.JobSpec) { s.Dependency = &api.Dependency{} }, "dependency", "no clauses"},
	"dependency bad job id":     {func(s *api.JobSpec) { s.Dependency = dep("afterok", "x") }, "dependency", `"x" is not a job id`},
	"dependency job id 0":       {func(s *api.JobSpec) { s.Dependency = dep("afterok", "0") }, "dependency", "is not a job id"},
	"dependency no ids":         {func(s *api.JobSpec) { s.Dependency = dep("afterok") }, "dependency", "needs at least one job id"},
	"dependency singleton ids":  {func(s *api.JobSpec) { s.Dependency = dep("singleton", "1") }, "dependency", "singleton takes no job ids"},
	"dependency delay on ok":    {func(s *api.JobSpec) { s.Dependency = delayed("afterok", 5) }, "dependency", "only after takes a +minutes delay"},
	"dependency delay negative": {func(s *api.JobSpec) { s.Dependency = delayed("after", -1) }, "dependency", "between 0 and"},
	"dependency raw disagrees": {func(s *api.JobSpec) {
		s.Dependency = &api.Dependency{Raw: "afterok:2", Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"1"}}}}
	}, "dependency", "does not say what the clauses say"},

	// Text.
	"no user":                {func(s *api.JobSpec) { s.User = "" }, "user", "no user"},
	"user with spaces":       {func(s *api.JobSpec) { s.User = "a b" }, "user", "must not contain spaces"},
	"name with NUL":          {func(s *api.JobSpec) { s.Name = "a\x00b" }, "name", "control character"},
	"name not UTF-8":         {func(s *api.JobSpec) { s.Name = "\xff" }, "name", "is not valid UTF-8"},
	"name with escape":       {func(s *api.JobSpec) { s.Name = "\x1b]0;owned\x07" }, "name", "control character"},
	"name with C1 control":   {func(s *api.JobSpec) { s.Name = "a\u009bb" }, "name", "control character U+009B"},
	"name too long":          {func(s *api.JobSpec) { s.Name = strings.Repeat("n", 257) }, "name", "257 bytes long; the most is 256"},
	"request id 1 MB":        {func(s *api.JobSpec) { s.RequestID = strings.Repeat("r", 1<<20) }, "request_id", "the most is 128"},
	"partition as a path":    {func(s *api.JobSpec) { s.Partition = "../x" }, "partition", "must start with a letter"},
	"account with a slash":   {func(s *api.JobSpec) { s.Account = "a/b" }, "account", "may hold only letters"},
	"image as a path":        {func(s *api.JobSpec) { s.Image = "../../etc" }, "image", "must start with"},
	"work dir relative":      {func(s *api.JobSpec) { s.WorkDir = "tmp" }, "work_dir", "absolute path"},
	"negative scratch space": {func(s *api.JobSpec) { s.TmpMB = -1 }, "tmp_mb", "--tmp must be from 0 to"},
	"output with a newline":  {func(s *api.JobSpec) { s.Output = "a\nb" }, "output", "control character"},
	"path too long":          {func(s *api.JobSpec) { s.Error = "/" + strings.Repeat("p", 4096) }, "error", "the most is 4096"},

	// Script, environment and arguments.
	"script empty":        {func(s *api.JobSpec) { s.Script = "" }, "script", "is empty"},
	"script without #!":   {func(s *api.JobSpec) { s.Script = "echo hi\n" }, "script", "does not look like a batch script"},
	"script with NUL":     {func(s *api.JobSpec) { s.Script = "#!/bin/sh\n\x00" }, "script", "NUL byte (line 2)"},
	"script not UTF-8":    {func(s *api.JobSpec) { s.Script = "#!/bin/sh\n\xff\n" }, "script", "not valid UTF-8 (line 2)"},
	"script over 4 MiB":   {func(s *api.JobSpec) { s.Script = "#!/bin/sh\n" + strings.Repeat("#", MaxScriptBytes) }, "script", "larger than 4194304 bytes"},
	"env entry without =": {func(s *api.JobSpec) { s.Env = []string{"NOVALUE"} }, "env", "entry 1 is not KEY=VALUE"},
	"env key with escape": {func(s *api.JobSpec) { s.Env = []string{"\x1b=1"} }, "env", "not a variable name"},
	"env value with NUL":  {func(s *api.JobSpec) { s.Env = []string{"A=\x00"} }, "env", "holds a NUL byte"},
	"env 50 MB":           {func(s *api.JobSpec) { s.Env = []string{"A=" + strings.Repeat("x", 50<<20)} }, "env", "over 1048576 bytes"},
	"env too many":        {func(s *api.JobSpec) { s.Env = manyVars(MaxEnvEntries + 1) }, "env", "10001 variables"},
	"args too many":       {func(s *api.JobSpec) { s.Args = make([]string, MaxArgs+1) }, "args", "10001 script arguments"},
	"args too large":      {func(s *api.JobSpec) { s.Args = []string{strings.Repeat("a", MaxArgsBytes+1)} }, "args", "over 1048576 bytes"},
	"args not UTF-8":      {func(s *api.JobSpec) { s.Args = []string{"\xff"} }, "args", "argument 1 must be UTF-8"},
	"args with a NUL":     {func(s *api.JobSpec) { s.Args = []string{"a", "b\x00"} }, "args", "argument 2"},
	"comment with a tab":  {func(s *api.JobSpec) { s.Comment = "a\tb" }, "comment", "control character '\\t'"},
	"qos with a space":    {func(s *api.JobSpec) { s.QOS = "high prio" }, "qos", "may hold only letters"},
}

func dep(typ string, ids ...string) *api.Dependency {
	return &api.Dependency{Clauses: []api.DepClause{{Type: typ, JobIDs: ids}}}
}

func delayed(typ string, minutes int) *api.Dependency {
	return &api.Dependency{Clauses: []api.DepClause{{Type: typ, JobIDs: []string{"1"}, Minutes: minutes}}}
}

func TestValidateSpecRefuses(t *testing.T) {
	for name, tc := range badSpecs {
		t.Run(name, func(t *testing.T) {
			sp := goodSpec()
			tc.edit(&sp)
			err := ValidateSpec(&sp, validateNow)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ValidateSpec = %v, want an *Error", err)
			}
			if e.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q (field %q), want field %q and a message containing %q", err, e.Field, tc.field, tc.want)
			}
			if len(err.Error()) > 600 {
				t.Errorf("the message is %d bytes long; values must be cut", len(err.Error()))
			}
		})
	}
}

func TestValidateSpecAccepts(t *testing.T) {
	tests := map[string]func(s *api.JobSpec){
		"the base request":              func(*api.JobSpec) {},
		"everything at its bounds":      atBounds,
		"nodes 0 is unset":              func(s *api.JobSpec) { s.Nodes = 0 },
		"a node range, a task per node": func(s *api.JobSpec) { s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode = 2, 4, 0, 1 },
		"nodes and tasks":               func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NTasksPerNode = 2, 4, 2 },
		"everything of nodes": func(s *api.JobSpec) {
			s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode, s.Exclusive = 4, 8, 8, 2, true
			s.NodeList, s.Exclude, s.Constraint, s.Distribution = "n[1-2]", "n[7-9]", "intel&(ib|roce)&gpu*2&[r1|r2]", "cyclic"
			s.SpreadJob, s.Contiguous = true, true
		},
		"a negative nice":          func(s *api.JobSpec) { s.Nice = -MaxNice },
		"an array with raw text":   func(s *api.JobSpec) { s.Array, _ = ParseArray("0-15:4,3,7%2") },
		"a dependency with raw":    func(s *api.JobSpec) { s.Dependency, _ = ParseDependency("after:12+5:13,afterok:4_2") },
		"overlapping array ranges": func(s *api.JobSpec) { s.Array, _ = ParseArray("0-1000000,5,7-9") },
		"a name in any language":   func(s *api.JobSpec) { s.Name = "計算 ジョブ — été" },
		"a MIG profile":            func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Type: "1g.10gb", Count: 2}} },
		"begin in the past":        func(s *api.JobSpec) { s.Begin = validateNow.AddDate(-1, 0, 0) },
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			sp := goodSpec()
			edit(&sp)
			if err := ValidateSpec(&sp, validateNow); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// atBounds sets every bounded number to its largest allowed value.
func atBounds(s *api.JobSpec) {
	s.NTasks, s.CPUsPerTask = 1000, 1000
	s.MemPerCPU = MaxMemoryMiB / MaxCPUs
	s.TimeLimit = MaxTimeLimit
	s.Nice = MaxNice
	s.Begin = validateNow.Add(MaxBeginAhead)
	s.Gres = []api.Gres{{Name: "gpu", Count: MaxGresCount}, {Name: "vf", Count: MaxGresCount}}
	s.Hugepages = []api.HugepageRequest{{SizeKB: Hugepage1G, Count: MaxMemoryMiB / 1024}}
	s.Array = &api.ArraySpec{Ranges: ranges(rng(0, MaxArrayIndex, 1)), Throttle: MaxArrayIndex + 1}
	s.RequestID = strings.Repeat("r", MaxRequestIDBytes)
	s.Name = strings.Repeat("n", MaxNameBytes)
	s.WorkDir = "/" + strings.Repeat("w", MaxPathBytes-1)
}

func TestShownCutsLongValues(t *testing.T) {
	got := Shown(strings.Repeat("é", 100))
	if !strings.HasSuffix(got, "… (200 bytes)") || len(got) > 64+len("… (200 bytes)") {
		t.Fatalf("Shown = %q", got)
	}
	if !strings.HasPrefix(got, strings.Repeat("é", 32)) {
		t.Fatalf("Shown split a character: %q", got)
	}
}

func rng(first, last, step int) api.ArrayRange {
	return api.ArrayRange{First: first, Last: last, Step: step}
}

func ranges(rs ...api.ArrayRange) []api.ArrayRange { return rs }
