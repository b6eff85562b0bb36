package submit

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral/api"
)

var testNow = time.Date(2024, 3, 13, 10, 0, 0, 0, time.UTC)

const basicScript = "#!/bin/bash\necho hello\n"

var testEnv = []string{"PATH=/usr/bin", "HOME=/home/alice", "USER=alice"}

// sortedTestEnv is testEnv as Parse stores it by default (--export=ALL).
var sortedTestEnv = []string{"HOME=/home/alice", "PATH=/usr/bin", "USER=alice"}

// testContext is a submission from /home/alice/proj whose file system holds
// files (paths relative to the submit directory or absolute).
func testContext(files map[string]string) Context {
	return Context{
		// A shell that can read three of its limits.
		Rlimit: func(name string) (uint64, bool) {
			v, ok := map[string]uint64{"CORE": 0, "NOFILE": 1024, "STACK": api.RlimitUnlimited}[name]
			return v, ok
		},
		Env:  testEnv,
		Cwd:  "/home/alice/proj",
		User: "alice",
		Now:  testNow,
		ReadFile: func(p string) ([]byte, error) {
			if strings.HasSuffix(p, "/vars.env") {
				return []byte("A=from file\x00B=two\nlines\x00"), nil
			}
			for name, text := range files {
				if p == name || p == "/home/alice/proj/"+name {
					return []byte(text), nil
				}
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
	}
}

// baseSpec is what Parse makes of job.sh holding basicScript and no options.
func baseSpec() api.JobSpec {
	return api.JobSpec{
		Name: "job.sh", User: "alice", Script: basicScript,
		SubmitDir: "/home/alice/proj", WorkDir: "/home/alice/proj",
		Env: sortedTestEnv, NTasks: 1, CPUsPerTask: 1,
	}
}

// optionCase is a command line (job.sh is appended) and how it changes the
// request from baseSpec.
type optionCase struct {
	args []string // job.sh is appended
	spec func(s *api.JobSpec)
	req  func(r *Request)
	root bool // submit as a privileged user (Context.Privileged)
}

var optionCases = map[string]optionCase{
	"defaults": {},
	"--mail-type": {args: []string{"--mail-type=end,begin,TIME_LIMIT_80", "--mail-user=bob@example.org"}, spec: func(s *api.JobSpec) {
		s.MailType, s.MailUser = []string{api.MailBegin, api.MailEnd, api.MailTimeLimit80}, "bob@example.org"
	}},
	"--mail-type=NONE":          {args: []string{"--mail-type=ALL", "--mail-type=NONE"}},
	"--open-mode=append":        {args: []string{"--open-mode=append"}, spec: func(s *api.JobSpec) { s.OpenMode = api.OpenModeAppend }},
	"--open-mode=truncate wins": {args: []string{"--open-mode=a", "--open-mode=truncate"}},
	"-i":                        {args: []string{"-i", "in-%j.txt"}, spec: func(s *api.JobSpec) { s.Input = "in-%j.txt" }},
	"--get-user-env":            {args: []string{"--get-user-env=10L"}, spec: func(s *api.JobSpec) { s.GetUserEnv = true }},
	"--propagate=NOFILE,STACK": {args: []string{"--propagate=nofile,RLIMIT_STACK"}, spec: func(s *api.JobSpec) {
		s.Rlimits = []api.Rlimit{{Name: "NOFILE", Value: 1024}, {Name: "STACK", Value: api.RlimitUnlimited}}
	}},
	"--propagate": {args: []string{"--propagate"}, spec: func(s *api.JobSpec) {
		s.Rlimits = []api.Rlimit{{Name: "CORE", Value: 0}, {Name: "NOFILE", Value: 1024}, {Name: "STACK", Value: api.RlimitUnlimited}}
	}},
	"--mem=0":              {args: []string{"--mem=0"}, spec: func(s *api.JobSpec) { s.MemAll = true }},
	"--mem=0 replaced":     {args: []string{"--mem=0", "--mem=2G"}, spec: func(s *api.JobSpec) { s.MemPerNode = 2048 }},
	"--hint=nomultithread": {args: []string{"--hint=nomultithread"}, spec: func(s *api.JobSpec) { s.Hint = api.HintNoMultithread }},
	"--threads-per-core":   {args: []string{"--threads-per-core=1", "--ntasks-per-core=1"}, spec: func(s *api.JobSpec) { s.ThreadsPerCore, s.NTasksPerCore = 1, 1 }},
	"--mem-bind=local":     {args: []string{"--mem-bind=verbose,local"}, spec: func(s *api.JobSpec) { s.MemBind, s.NUMA = "verbose,local", api.NUMAStrict }},
	"--mem-bind=map_mem": {args: []string{"--mem-bind=map_mem:3,1"}, spec: func(s *api.JobSpec) {
		s.MemBind, s.NUMA, s.MemNodes = "map_mem:3,1", api.NUMAStrict, []int{1, 3}
	}},
	"--mem-bind=mask_mem": {args: []string{"--mem-bind=mask_mem:0x5"}, spec: func(s *api.JobSpec) {
		s.MemBind, s.NUMA, s.MemNodes = "mask_mem:0x5", api.NUMAStrict, []int{0, 2}
	}},
	"--priority":     {args: []string{"--priority=500"}, spec: func(s *api.JobSpec) { s.Priority = 500 }},
	"--priority=TOP": {args: []string{"--priority=top"}, spec: func(s *api.JobSpec) { s.Priority = api.MaxPriority }},
	"-O":             {args: []string{"-O", "-n", "8", "-c", "2"}, spec: func(s *api.JobSpec) { s.Overcommit, s.NTasks, s.CPUsPerTask = true, 8, 2 }},
	"--cpus-per-gpu": {args: []string{"--gpus=3", "-n", "2", "--cpus-per-gpu=5"}, spec: func(s *api.JobSpec) {
		s.Gres, s.NTasks, s.CPUsPerTask, s.CPUsPerGPU = []api.Gres{{Name: "gpu", Count: 3}}, 2, 8, 5
	}},
	"--export-file": {args: []string{"--export-file=vars.env", "--export=NONE,A=1"}, spec: func(s *api.JobSpec) {
		s.Env = []string{"A=from file", "B=two\nlines"}
	}},
	"-M":            {args: []string{"-M", "hpc1", "--parsable"}, req: func(r *Request) { r.Cluster, r.Parsable = "hpc1", true }},
	"--deadline":    {args: []string{"--deadline=now+2hours"}, spec: func(s *api.JobSpec) { s.Deadline = testNow.Add(2 * time.Hour) }},
	"--gpus=2":      {args: []string{"--gpus=2"}, spec: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: 2}} }},
	"--gpus=h100:1": {args: []string{"--gpus=h100:1"}, spec: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Type: "h100", Count: 1}} }},
	"--gpus-per-task before -n": {args: []string{"--gpus-per-task=2", "-n", "3"}, spec: func(s *api.JobSpec) {
		s.NTasks, s.Gres = 3, []api.Gres{{Name: "gpu", Count: 6}}
	}},
	"--sriov":     {args: []string{"--sriov=2"}, spec: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "vf", Count: 2}} }},
	"--gres=vf:1": {args: []string{"--gres=vf:1"}, spec: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "vf", Count: 1}} }},
	"--hugepages both sizes": {args: []string{"--hugepages=2M:512,1G:4"}, spec: func(s *api.JobSpec) {
		s.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: 512}, {SizeKB: 1 << 20, Count: 4}}
	}},
	"--numa=strict":          {args: []string{"--numa=strict"}, spec: func(s *api.JobSpec) { s.NUMA = api.NUMAStrict }},
	"-J":                     {args: []string{"-J", "train"}, spec: func(s *api.JobSpec) { s.Name = "train" }},
	"--job-name with spaces": {args: []string{"--job-name=my job"}, spec: func(s *api.JobSpec) { s.Name = "my job" }},
	"-p":                     {args: []string{"-p", "debug"}, spec: func(s *api.JobSpec) { s.Partition = "debug" }},
	"--partition":            {args: []string{"--partition=gpu"}, spec: func(s *api.JobSpec) { s.Partition = "gpu" }},
	"--part prefix":          {args: []string{"--part", "gpu"}, spec: func(s *api.JobSpec) { s.Partition = "gpu" }},
	"-t":                     {args: []string{"-t", "1:00:00"}, spec: func(s *api.JobSpec) { s.TimeLimit = 3600 }},
	"--time days":            {args: []string{"--time=2-00:00:00"}, spec: func(s *api.JobSpec) { s.TimeLimit = 2 * 86400 }},
	"--time unlimited":       {args: []string{"-t", "UNLIMITED"}, spec: func(s *api.JobSpec) { s.TimeLimit = 0 }},
	"-n":                     {args: []string{"-n", "4"}, spec: func(s *api.JobSpec) { s.NTasks = 4 }},
	"--ntasks attached":      {args: []string{"-n8"}, spec: func(s *api.JobSpec) { s.NTasks = 8 }},
	"-c":                     {args: []string{"-c", "2"}, spec: func(s *api.JobSpec) { s.CPUsPerTask = 2 }},
	"--cpus-per-task":        {args: []string{"--cpus-per-task=16"}, spec: func(s *api.JobSpec) { s.CPUsPerTask = 16 }},
	"-N 1":                   {args: []string{"-N", "1"}, spec: func(s *api.JobSpec) { s.Nodes = 1 }},
	"--nodes=1-1":            {args: []string{"--nodes=1-1"}, spec: func(s *api.JobSpec) { s.Nodes = 1 }},
	"--mem":                  {args: []string{"--mem=4G"}, spec: func(s *api.JobSpec) { s.MemPerNode = 4096 }},
	"--mem default unit":     {args: []string{"--mem", "500"}, spec: func(s *api.JobSpec) { s.MemPerNode = 500 }},
	"--mem-per-cpu":          {args: []string{"--mem-per-cpu=512K"}, spec: func(s *api.JobSpec) { s.MemPerCPU = 1 }},
	"--tmp":                  {args: []string{"--tmp=10G"}, spec: func(s *api.JobSpec) { s.TmpMB = 10240 }},
	"--tmp default unit":     {args: []string{"--tmp", "500"}, spec: func(s *api.JobSpec) { s.TmpMB = 500 }},
	"-o":                     {args: []string{"-o", "out-%j.txt"}, spec: func(s *api.JobSpec) { s.Output = "out-%j.txt" }},
	"-e":                     {args: []string{"--error=/tmp/%x.err"}, spec: func(s *api.JobSpec) { s.Error = "/tmp/%x.err" }},
	"-D relative":            {args: []string{"-D", "runs/1"}, spec: func(s *api.JobSpec) { s.WorkDir = "/home/alice/proj/runs/1" }},
	"-D parent":              {args: []string{"--chdir=../other"}, spec: func(s *api.JobSpec) { s.WorkDir = "/home/alice/other" }},
	"-D absolute":            {args: []string{"-D", "/scratch/x"}, spec: func(s *api.JobSpec) { s.WorkDir = "/scratch/x" }},
	"--export=NONE":          {args: []string{"--export=NONE"}, spec: func(s *api.JobSpec) { s.Env = nil }},
	"--export=ALL,VAR": {args: []string{"--export=ALL,OMP_NUM_THREADS=4"}, spec: func(s *api.JobSpec) {
		s.Env = []string{"HOME=/home/alice", "OMP_NUM_THREADS=4", "PATH=/usr/bin", "USER=alice"}
	}},
	"--export=names": {args: []string{"--export", "PATH,X=1"}, spec: func(s *api.JobSpec) {
		s.Env = []string{"PATH=/usr/bin", "X=1"}
	}},
	"-A":                      {args: []string{"-A", "physics"}, spec: func(s *api.JobSpec) { s.Account = "physics" }},
	"--account":               {args: []string{"--account=chem"}, spec: func(s *api.JobSpec) { s.Account = "chem" }},
	"-q":                      {args: []string{"-q", "high"}, spec: func(s *api.JobSpec) { s.QOS = "high" }},
	"--qos":                   {args: []string{"--qos=low"}, spec: func(s *api.JobSpec) { s.QOS = "low" }},
	"--requeue":               {args: []string{"--requeue"}, spec: func(s *api.JobSpec) { s.Requeue = true }},
	"--no-requeue wins":       {args: []string{"--requeue", "--no-requeue"}},
	"--requeue wins":          {args: []string{"--no-requeue", "--requeue"}, spec: func(s *api.JobSpec) { s.Requeue = true }},
	"-H":                      {args: []string{"-H"}, spec: func(s *api.JobSpec) { s.Hold = true }},
	"--hold":                  {args: []string{"--hold"}, spec: func(s *api.JobSpec) { s.Hold = true }},
	"--begin":                 {args: []string{"--begin=now+1hour"}, spec: func(s *api.JobSpec) { s.Begin = testNow.Add(time.Hour) }},
	"-b":                      {args: []string{"-b", "16:30"}, spec: func(s *api.JobSpec) { s.Begin = testNow.Add(6*time.Hour + 30*time.Minute) }},
	"--comment":               {args: []string{"--comment", "hello world"}, spec: func(s *api.JobSpec) { s.Comment = "hello world" }},
	"--comment empty":         {args: []string{"--comment="}},
	"--nice bare":             {args: []string{"--nice"}, spec: func(s *api.JobSpec) { s.Nice = 100 }},
	"--nice=N":                {args: []string{"--nice=5"}, spec: func(s *api.JobSpec) { s.Nice = 5 }},
	"--nice negative as root": {args: []string{"--nice=-5"}, root: true, spec: func(s *api.JobSpec) { s.Nice = -5 }},
	"--nice=0":                {args: []string{"--nice=10", "--nice=0"}},
	"--gres":                  {args: []string{"--gres=gpu:a100:2"}, spec: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Type: "a100", Count: 2}} }},
	"--gres=none clears":      {args: []string{"--gres=gpu:1", "--gres=none"}},
	"-d":                      {args: []string{"-d", "afterok:12"}, spec: depSpec("afterok:12", "afterok", "12")},
	"--dependency":            {args: []string{"--dependency=afterany:3_1"}, spec: depSpec("afterany:3_1", "afterany", "3_1")},
	"-a":                      {args: []string{"-a", "0-3"}, spec: arraySpec("0-3", 0, 3, 1, 0)},
	"--array with limit":      {args: []string{"--array=0-9:3%2"}, spec: arraySpec("0-9:3%2", 0, 9, 3, 2)},
	"--parsable":              {args: []string{"--parsable"}, req: func(r *Request) { r.Parsable = true }},
	"-W":                      {args: []string{"-W"}, req: func(r *Request) { r.Wait = true }},
	"--wait":                  {args: []string{"--wait"}, req: func(r *Request) { r.Wait = true }},
	"--image":                 {args: []string{"--image=ubuntu-24.04"}, spec: func(s *api.JobSpec) { s.Image = "ubuntu-24.04" }},
	"combined short":          {args: []string{"-HW"}, spec: func(s *api.JobSpec) { s.Hold = true }, req: func(r *Request) { r.Wait = true }},
	"later option wins":       {args: []string{"-p", "a", "--partition=b"}, spec: func(s *api.JobSpec) { s.Partition = "b" }},
	"double dash":             {args: []string{"-H", "--"}, spec: func(s *api.JobSpec) { s.Hold = true }},
	"repeated --mem-per-cpu":  {args: []string{"--mem-per-cpu=1G", "--mem-per-cpu=2G"}, spec: func(s *api.JobSpec) { s.MemPerCPU = 2048 }},
}

func TestParseOptions(t *testing.T) {
	tests := optionCases
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append(append([]string(nil), tc.args...), "job.sh")
			c := testContext(map[string]string{"job.sh": basicScript})
			c.Privileged = tc.root
			got, err := Parse(args, c)
			if err != nil {
				t.Fatalf("Parse(%q): %v", args, err)
			}
			want := &Request{Spec: baseSpec(), ScriptPath: "job.sh"}
			if tc.spec != nil {
				tc.spec(&want.Spec)
			}
			if tc.req != nil {
				tc.req(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", args, got, want)
			}
		})
	}
}

func depSpec(raw, typ, id string) func(s *api.JobSpec) {
	return func(s *api.JobSpec) {
		s.Dependency = &api.Dependency{Raw: raw, Clauses: []api.DepClause{{Type: typ, JobIDs: []string{id}}}}
	}
}

func arraySpec(raw string, first, last, step, throttle int) func(s *api.JobSpec) {
	return func(s *api.JobSpec) {
		s.Array = &api.ArraySpec{Raw: raw, Throttle: throttle, Ranges: []api.ArrayRange{{First: first, Last: last, Step: step}}}
	}
}

func TestParseScriptSources(t *testing.T) {
	tests := map[string]struct {
		args  []string
		stdin string
		want  func(r *Request)
	}{
		"script arguments": {
			args: []string{"-p", "x", "job.sh", "a", "-p", "--hold"},
			want: func(r *Request) {
				r.Spec.Partition = "x"
				r.Spec.Args = []string{"a", "-p", "--hold"}
			},
		},
		"script in a subdirectory": {
			args: []string{"sub/run.sh"},
			want: func(r *Request) { r.Spec.Name = "run.sh"; r.ScriptPath = "sub/run.sh" },
		},
		"absolute script path": {
			args: []string{"/opt/jobs/abs.sh"},
			want: func(r *Request) { r.Spec.Name = "abs.sh"; r.ScriptPath = "/opt/jobs/abs.sh" },
		},
		"wrap": {
			args: []string{"--wrap", "hostname -f"},
			want: func(r *Request) {
				r.Spec.Name, r.Spec.Script, r.ScriptPath = "wrap", "#!/bin/sh\nhostname -f\n", ""
			},
		},
		"wrap with -J": {
			args: []string{"--wrap=true", "-J", "w"},
			want: func(r *Request) {
				r.Spec.Name, r.Spec.Script, r.ScriptPath = "w", "#!/bin/sh\ntrue\n", ""
			},
		},
		"wrap ignores directive-looking text": {
			args: []string{"--wrap=#SBATCH -p x"},
			want: func(r *Request) {
				r.Spec.Name, r.Spec.Script, r.ScriptPath = "wrap", "#!/bin/sh\n#SBATCH -p x\n", ""
			},
		},
		"stdin": {
			stdin: "#!/bin/sh\n#SBATCH -p fromstdin\nls\n",
			want: func(r *Request) {
				r.Spec.Name, r.Spec.Script, r.ScriptPath = "sbatch", "#!/bin/sh\n#SBATCH -p fromstdin\nls\n", ""
				r.Spec.Partition = "fromstdin"
			},
		},
		"stdin with options": {
			args:  []string{"-J", "piped"},
			stdin: basicScript,
			want: func(r *Request) {
				r.Spec.Name, r.ScriptPath = "piped", ""
			},
		},
	}
	files := map[string]string{"job.sh": basicScript, "sub/run.sh": basicScript, "/opt/jobs/abs.sh": basicScript}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := testContext(files)
			if tc.stdin != "" {
				c.Stdin = strings.NewReader(tc.stdin)
			}
			got, err := Parse(tc.args, c)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			want := &Request{Spec: baseSpec(), ScriptPath: "job.sh"}
			tc.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.args, got, want)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	tests := map[string][]string{
		"-h":                {"-h"},
		"--help":            {"--help"},
		"help after others": {"-p", "x", "--help", "job.sh"},
		"help in a cluster": {"-Hh"},
		"help prefix":       {"--he"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(args, testContext(nil))
			if !errors.Is(err, ErrHelp) {
				t.Errorf("Parse(%q) = %v, want ErrHelp", args, err)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	u := Usage()
	for _, want := range []string{
		"Usage: corral submit", "-J, --job-name=NAME", "--mem=SIZE", "--nice[=N]",
		"-W, --wait", "--image=NAME", "--wrap=COMMAND", "#SBATCH", "-h, --help",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("Usage() lacks %q", want)
		}
	}
	for _, hidden := range []string{"--bb", "--acctg-freq", "--uid"} {
		if strings.Contains(u, hidden) {
			t.Errorf("Usage() shows option %s, which corral does not honour", hidden)
		}
	}
}

// TestOptionTable checks that every option has help and a handler, and
// that every other sbatch option gets its fate: accepted with its warning,
// or refused with its reason, by name.
func TestOptionTable(t *testing.T) {
	for _, d := range supportedOptions {
		if d.Help == "" || d.apply == nil || d.Long == "" {
			t.Errorf("option %s lacks help, a handler or a long name", d.Name())
		}
	}
	for _, o := range otherOptions {
		t.Run(o.long, func(t *testing.T) {
			args := []string{"--" + o.long}
			if o.arg == req {
				args = []string{"--" + o.long + "=1"}
			}
			r, err := Parse(append(args, "job.sh"), testContext(map[string]string{"job.sh": basicScript}))
			switch o.fate {
			case fateWarn:
				if err != nil || len(r.Warnings) != 1 || r.Warnings[0] != "--"+o.long+": "+o.why {
					t.Fatalf("Parse(%q) = %v, %v; want it accepted with the warning %q", args, r, err, o.why)
				}
			case fateRefuse:
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--"+o.long) || !strings.Contains(err.Error(), o.why) {
					t.Fatalf("Parse(%q) = %v; want a refusal naming --%s with its reason", args, err, o.long)
				}
			default:
				t.Fatalf("--%s has no fate", o.long)
			}
			if o.why == "" || strings.Contains(o.why, "yet") {
				t.Errorf("--%s: %q is no reason", o.long, o.why)
			}
		})
	}
}
