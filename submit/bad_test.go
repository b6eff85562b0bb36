package submit

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"

	"corral/internal/getopt"
	"corral/internal/hostlist"
)

// badSubmission is a submission Parse must refuse and the error it must give.
type badSubmission struct {
	args  []string
	files map[string]string // job.sh defaults to good
	stdin *string
	env   []string // the submitting environment; testEnv when nil
	want  string
	exact bool
	is    error  // errors.Is target, if any
	field string // *Error.Field, if checked
	line  int    // *Error.Line, if checked
}

// badSubmissions is the catalog of refused submissions, by kind of mistake.
var badSubmissions = map[string]badSubmission{
	// Command-line grammar.
	"unknown option": {args: []string{"--foo", "job.sh"},
		want: `unknown option "--foo" (valid options: --job-name, --partition`, is: getopt.ErrUnknownOption},
	"unknown option with a close match": {args: []string{"--partiton=debug", "job.sh"},
		want: `unknown option "--partiton" (did you mean --partition?)`, exact: true, is: getopt.ErrUnknownOption, field: "--partiton"},
	"unknown short option": {args: []string{"-Z", "job.sh"},
		want: `unknown option "-Z"`, is: getopt.ErrUnknownOption, field: "-Z"},
	"ambiguous prefix": {args: []string{"--mem-per=1G", "job.sh"},
		want: `"--mem-per" is ambiguous (it could be --mem-per-cpu, --mem-per-gpu`, is: getopt.ErrAmbiguousOption},
	"missing value": {args: []string{"-t"},
		want: `option "-t" requires a value (e.g. --time=TIME)`, is: getopt.ErrMissingValue},
	"flag with a value": {args: []string{"--hold=yes", "job.sh"},
		want: "--hold takes no value", is: getopt.ErrUnexpectedValue},

	// Malformed values.
	"--deadline passed": {args: []string{"--deadline=2020-01-01", "job.sh"},
		want: "--deadline 2020-01-01T00:00:00Z has passed", field: "deadline"},
	"--deadline before --begin": {args: []string{"--begin=now+2hours", "--deadline=now+1hour", "job.sh"},
		want: "is not after --begin", field: "deadline"},
	"--deadline form": {args: []string{"--deadline=soon", "job.sh"},
		want: "--deadline=soon:", field: "--deadline"},
	"--cpus-per-gpu with -c": {args: []string{"--gpus=1", "-c", "2", "--cpus-per-gpu=4", "job.sh"},
		want: "--cpus-per-gpu and --cpus-per-task are mutually exclusive"},
	"--cpus-per-gpu without GPUs": {args: []string{"--cpus-per-gpu=4", "job.sh"},
		want: "the job asks for no GPUs"},
	"--priority 0": {args: []string{"--priority=0", "job.sh"},
		want: "give a priority from 1 to 4294967293, or TOP"},
	"--export-file missing": {args: []string{"--export-file=nope.env", "job.sh"},
		want: "--export-file=nope.env: cannot read it"},
	"--export-file descriptor 1": {args: []string{"--export-file=1", "job.sh"},
		want: "give a file, or a descriptor from 3 up"},
	"--hint other":       {args: []string{"--hint=fast", "job.sh"}, want: "--hint=fast: use nomultithread, multithread"},
	"--mem-bind unknown": {args: []string{"--mem-bind=cyclic", "job.sh"}, want: `unknown type "cyclic"`},
	"--mem-bind bad id":  {args: []string{"--mem-bind=map_mem:a", "job.sh"}, want: `"a" is not a NUMA node id`},
	"--mail-type unknown": {args: []string{"--mail-type=BEGIN,START", "job.sh"},
		want: `--mail-type=BEGIN,START: unknown mail type "START"`, field: "--mail-type"},
	"--mail-user like an option": {args: []string{"--mail-user=-oFoo", "job.sh"},
		want: "--mail-user=-oFoo: must not start with '-'", field: "--mail-user"},
	"--mem unit": {args: []string{"--mem=4X", "job.sh"},
		want: `--mem=4X: unknown unit "X" (use K, M, G or T)`, exact: true, field: "--mem"},
	"--tmp unit": {args: []string{"--tmp=4X", "job.sh"},
		want: `--tmp=4X: unknown unit "X" (use K, M, G or T)`, exact: true, field: "--tmp"},
	"--mem-per-cpu unit": {args: []string{"--mem-per-cpu=4X", "job.sh"},
		want: `--mem-per-cpu=4X: unknown unit "X" (use K, M, G or T)`, exact: true, field: "--mem-per-cpu"},
	"--mem-per-cpu zero": {args: []string{"--mem-per-cpu=0", "job.sh"},
		want: "--mem-per-cpu=0: give an amount per CPU"},
	"--mem negative": {args: []string{"--mem", "-5", "job.sh"},
		want: `--mem=-5: "-5" is not a whole number`},
	"--time letters": {args: []string{"--time=abc", "job.sh"},
		want: `--time=abc: "abc" is not a whole number (use minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED`, field: "--time"},
	"-c negative": {args: []string{"-c", "-1", "job.sh"},
		want: "--cpus-per-task=-1: must be a whole number between 1 and 1000000 (e.g. -c 4)", exact: true, field: "--cpus-per-task"},
	"-c letters": {args: []string{"-cx", "job.sh"},
		want: "--cpus-per-task=x: must be a whole number"},
	"-n zero": {args: []string{"-n", "0", "job.sh"},
		want: "--ntasks=0: must be a whole number between 1 and 1000000 (e.g. -n 4)", exact: true, field: "--ntasks"},
	"-n too many": {args: []string{"-n", "2000000", "job.sh"},
		want: "--ntasks=2000000: must be a whole number between 1 and 1000000"},
	"-N 0": {args: []string{"-N", "0", "job.sh"},
		want: "--nodes=0: give a node count from 1 to 100000, or a range MIN-MAX (e.g. -N 2 or -N 2-4)", exact: true},
	"-N backwards": {args: []string{"-N", "2-1", "job.sh"},
		want: "--nodes=2-1: give a node count from 1 to 100000"},
	"-N too many": {args: []string{"-N", "100001", "job.sh"},
		want: "--nodes=100001: give a node count from 1 to 100000"},
	"-N more than tasks": {args: []string{"-N", "4", "-n", "2", "job.sh"},
		want: "ntasks \"2\": 2 tasks on at least 4 nodes: every node runs a task at least", field: "ntasks"},
	"-n over nodes of --ntasks-per-node": {args: []string{"-N", "2", "-n", "5", "--ntasks-per-node=2", "job.sh"},
		want: "5 tasks do not fit on 2 nodes of 2 tasks (--ntasks-per-node)"},
	"--ntasks-per-node 0": {args: []string{"--ntasks-per-node=0", "job.sh"},
		want: "--ntasks-per-node=0: must be a whole number between 1 and 1000000"},
	"--exclusive=user": {args: []string{"--exclusive=user", "job.sh"},
		want: "--exclusive=user: corral takes --exclusive alone", is: ErrUnsupported},
	"-w bad syntax": {args: []string{"-w", "n[1-", "job.sh"},
		want: "--nodelist=n[1-: not a host list"},
	"-w bad name": {args: []string{"-w", "n[1-2]", "-x", "-bad", "job.sh"},
		want: `--exclude=-bad: node name "-bad" must start with a letter, a digit or '_'`},
	"-w huge": {args: []string{"-w", "n[1-1000000000]", "job.sh"},
		want: "a job has at most 100000 nodes", is: hostlist.ErrTooMany},
	"-w over -N": {args: []string{"-N", "1", "-w", "n[1-3]", "job.sh"},
		want: "nodelist \"n[1-3]\": names 3 nodes, but the job may have at most 1; ask for -N 3", field: "nodelist"},
	"-w and -x overlap": {args: []string{"-w", "n[1-3]", "-x", "n3", "job.sh"},
		want: "node n3 is both in --nodelist and in --exclude", field: "exclude"},
	"-w file missing": {args: []string{"-w", "./hosts", "job.sh"},
		want: "--nodelist=./hosts: cannot read the file of node names"},
	"-F file missing": {args: []string{"-F", "hosts", "job.sh"},
		want: "--nodefile=hosts: cannot read the file of node names"},
	"--constraint syntax": {args: []string{"-C", "a&|b", "job.sh"},
		want: "--constraint=a&|b: at byte 2"},
	"--constraint mixed": {args: []string{"-C", "a&b|c", "job.sh"},
		want: "mixes '&' and '|' at one level; add parentheses"},
	"--constraint count over nodes": {args: []string{"-C", "gpu*2", "job.sh"},
		want: "its counts need 2 nodes, but the job may have at most 1; ask for -N 2", field: "constraint"},
	"--distribution plane": {args: []string{"-m", "plane=4", "job.sh"},
		want: "--distribution=plane=4: use block or cyclic", is: ErrUnsupported},
	"--gpus over a range": {args: []string{"-N", "2-4", "--gpus=4", "job.sh"},
		want: "--gpus=4: --gpus counts the job's GPUs in all, which must split evenly over a fixed node count"},
	"--gpus uneven": {args: []string{"-N", "2", "--gpus=3", "job.sh"},
		want: "--gpus=3: --gpus counts the job's GPUs in all, which must split evenly"},
	"--gpus-per-task on nodes": {args: []string{"-N", "2", "--gpus-per-task=1", "job.sh"},
		want: "--gpus-per-task=1: on several nodes give --ntasks-per-node too"},
	"--mem and --mem-per-cpu": {args: []string{"--mem=1G", "--mem-per-cpu=1G", "job.sh"},
		want: "--mem and --mem-per-cpu are mutually exclusive; give only one of them"},
	"--mem-per-cpu and --mem": {args: []string{"--mem-per-cpu=1G", "--mem=1G", "job.sh"},
		want: "--mem and --mem-per-cpu are mutually exclusive"},
	"--nice letters": {args: []string{"--nice=abc", "job.sh"},
		want: "--nice=abc: must be a whole number between -10000 and 10000"},
	"--nice out of range": {args: []string{"--nice=10001", "job.sh"},
		want: "--nice=10001: must be a whole number between -10000 and 10000"},
	"--nice negative without root": {args: []string{"--nice=-5", "job.sh"},
		want: "--nice=-5: only root may give a negative nice", field: "--nice"},
	"-n × -c too many CPUs": {args: []string{"-n", "1000000", "-c", "2", "job.sh"},
		want: `cpus_per_task "2": ntasks × cpus_per_task = 1000000 × 2 CPUs: the most a job may ask for is 1000000`, field: "cpus_per_task"},
	"--mem-per-cpu × CPUs too much": {args: []string{"--mem-per-cpu=1024T", "-n", "2000", "job.sh"},
		want: "mem_per_cpu × 2000 CPUs is more than 1099511627776 MiB", field: "mem_per_cpu_mb"},
	"--gpus too many": {args: []string{"--gpus=99999999999", "job.sh"},
		want: "give a GPU count from 1 to 1000000"},
	"--gpus-per-task × -n too many": {args: []string{"-n", "1000", "--gpus-per-task=2000", "job.sh"},
		want: `gres "gpu:2000000": the count must be between 1 and 1000000`, field: "gres"},
	"--begin too far ahead": {args: []string{"--begin=2100-01-01", "job.sh"},
		want: "the begin time must be after 1970 and at most 10 years ahead", field: "begin"},
	"-J not UTF-8": {args: []string{"-J", "caf\xe9", "job.sh"},
		want: `name "caf\xe9": is not valid UTF-8 (byte 3 is 0xe9)`, field: "name"},
	"-J escape sequence": {args: []string{"-J", "\x1b[2Jgotcha", "job.sh"},
		want: `name "\x1b[2Jgotcha": contains the control character '\x1b' at byte 0`, field: "name"},
	"--comment too long": {args: []string{"--comment=" + strings.Repeat("c", 300), "job.sh"},
		want: "is 300 bytes long; the most is 256", field: "comment"},
	"environment too large": {args: []string{"job.sh"}, env: []string{"BIG=" + strings.Repeat("x", 2<<20)},
		want: "env: the environment is over 1048576 bytes (1 MiB)", field: "env"},
	"too many variables": {args: []string{"job.sh"}, env: manyVars(MaxEnvEntries + 1),
		want: "env: 10001 variables; the most is 10000", field: "env"},
	"--nice too big": {args: []string{"--nice=9999999999", "job.sh"},
		want: "--nice=9999999999: must be a whole number"},
	"-J empty": {args: []string{"-J", "", "job.sh"},
		want: "--job-name: empty value (give a name, e.g. --job-name=NAME)", exact: true},
	"-J newline": {args: []string{"-J", "a\nb", "job.sh"},
		want: "must be a single line"},
	"-p with spaces": {args: []string{"-p", "a b", "job.sh"},
		want: "--partition=a b: must not contain spaces"},
	"-A empty": {args: []string{"--account=", "job.sh"},
		want: "--account: empty value"},
	"-q empty": {args: []string{"-q", " ", "job.sh"},
		want: "--qos= : empty value"},
	"--image empty": {args: []string{"--image=", "job.sh"},
		want: "--image: empty value"},
	"-o empty": {args: []string{"-o", "", "job.sh"},
		want: "--output: empty path (give one, e.g. --output=job-%j.out)", exact: true},
	"-e empty": {args: []string{"--error=", "job.sh"},
		want: "--error: empty path"},
	"-D empty": {args: []string{"-D", "", "job.sh"},
		want: "--chdir: empty path (give one, e.g. --chdir=/scratch/run1)"},
	"-o with NUL": {args: []string{"-o", "a\x00b", "job.sh"},
		want: "--output=a\x00b: a path must be a single line"},
	"--export ALL and NONE": {args: []string{"--export=ALL,NONE", "job.sh"},
		want: "--export=ALL,NONE: ALL and NONE cannot both be given"},
	"--export bad name": {args: []string{"--export=1X", "job.sh"},
		want: `"1X" is not a variable name`},
	"--begin": {args: []string{"--begin=soon", "job.sh"},
		want: `--begin=soon: "soon" is not a time`},
	"--gres": {args: []string{"--gres=gpu:0", "job.sh"},
		want: `--gres=gpu:0: count "0" in "gpu:0" must be between 1 and 1000000`},
	"--dependency": {args: []string{"-d", "afterok:x", "job.sh"},
		want: `--dependency=afterok:x: "x" in "afterok:x" is not a job id`},
	"--dependency mixed": {args: []string{"-d", "afterok:1,afterok:2?afterok:3", "job.sh"},
		want: "cannot be mixed"},
	"--array": {args: []string{"-a", "5-1", "job.sh"},
		want: `--array=5-1: "5-1": last index 1 is below first index 5`},
	"--array too large": {args: []string{"--array=0-2000000", "job.sh"},
		want: "above the largest allowed, 1000000"},

	// Refused Slurm options.
	"--open-mode other": {args: []string{"--open-mode=overwrite", "job.sh"},
		want: "--open-mode=overwrite: use append or truncate"},
	"--propagate unknown": {args: []string{"--propagate=NOFILE,FILES", "job.sh"},
		want: `--propagate=NOFILE,FILES: unknown resource limit "FILES"`},
	"--get-user-env form": {args: []string{"--get-user-env=soon", "job.sh"},
		want: "--get-user-env=soon: give nothing, a timeout"},
	"--reservation with a space": {args: []string{"--reservation=a b", "job.sh"}, want: "--reservation=a b"},
	"--gpus=0":                   {args: []string{"--gpus=0", "job.sh"}, want: "give a GPU count from 1 to 1000000"},
	"--hugepages=3M:2":           {args: []string{"--hugepages=3M:2", "job.sh"}, want: "SIZE 2M or 1G"},
	"--numa=sometimes":           {args: []string{"--numa=sometimes", "job.sh"}, want: "use prefer, strict or none"},
	"--sriov=none":               {args: []string{"--sriov=none", "job.sh"}, want: "virtual functions ≥ 1"},
	"-V in a script": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "#!/bin/sh\n#SBATCH -V\ntrue\n"},
		want: "it only makes sense on the command line"},

	// The script.
	"no script at all": {args: []string{"-p", "x"},
		want: "no batch script: give a script path, use --wrap=COMMAND, or pipe the script on standard input", is: ErrNoScript},
	"missing file": {args: []string{"nope.sh"},
		want:  `script "nope.sh": cannot read the batch script: open /home/alice/proj/nope.sh: file does not exist (no such file; check the path, which is relative to /home/alice/proj)`,
		exact: true, is: fs.ErrNotExist, field: "script"},
	"empty file": {args: []string{"job.sh"}, files: map[string]string{"job.sh": ""},
		want: `script "job.sh": the batch script is empty`, is: ErrEmptyScript},
	"white space only": {args: []string{"job.sh"}, files: map[string]string{"job.sh": " \n\t\n"},
		want: "is empty or only white space", is: ErrEmptyScript},
	"empty stdin": {stdin: ptr(""),
		want: "script: the batch script read from standard input is empty", is: ErrEmptyScript},
	"no shebang": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "echo hi\n"},
		want: `script "job.sh": This does not look like a batch script. The first line must start with #! followed by the path to an interpreter`,
		is:   ErrNotBatchScript},
	"shebang not on the first line": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "\n#!/bin/sh\necho\n"},
		want: "This does not look like a batch script", is: ErrNotBatchScript},
	"stdin without shebang": {stdin: ptr("ls\n"),
		want: "This does not look like a batch script", is: ErrNotBatchScript},
	"DOS line breaks": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "#!/bin/sh\r\necho\r\n"},
		want: `DOS line breaks (\r\n) instead of UNIX ones (\n); convert it, e.g. with dos2unix`},
	"NUL byte": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "#!/bin/sh\necho \x00\n"},
		want: "contains a NUL byte (line 2)"},
	"not UTF-8": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "#!/bin/sh\n# caf\xe9\necho\n"},
		want: "the batch script is not valid UTF-8 (line 2); convert it, e.g. with iconv -t UTF-8"},
	"too large": {args: []string{"job.sh"}, files: map[string]string{"job.sh": "#!/bin/sh\n" + strings.Repeat("#", MaxScriptBytes)},
		want: "the batch script is larger than 4194304 bytes (4 MiB)", is: ErrScriptTooLarge},
	"too large on stdin": {stdin: ptr("#!/bin/sh\n" + strings.Repeat("#", MaxScriptBytes)),
		want: "read from standard input is larger than", is: ErrScriptTooLarge},
	"wrap and a script": {args: []string{"--wrap=ls", "job.sh"},
		want: `--wrap=ls: cannot be combined with a script file or script arguments (got ["job.sh"])`},
	"wrap empty": {args: []string{"--wrap="},
		want: "--wrap: empty command (give the command to run, e.g. --wrap='hostname')", exact: true},

	// Directives, with their line numbers.
	"directive bad memory": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -J ok\n#SBATCH --mem=4X\necho\n"},
		want:  `job.sh:3: #SBATCH --mem=4X: unknown unit "X" (use K, M, G or T)`, exact: true, field: "--mem", line: 3},
	"directive lines count blanks": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n\n# note\n\n#SBATCH -t abc\n"},
		want:  `job.sh:5: #SBATCH -t abc: "abc" is not a whole number`, line: 5},
	"directive in a subdirectory script": {args: []string{"sub/job.sh"},
		files: map[string]string{"sub/job.sh": "#!/bin/bash\n#SBATCH -n 0\n"},
		want:  "sub/job.sh:2: #SBATCH -n 0: must be a whole number between 1 and 1000000", line: 2},
	"directive on stdin": {stdin: ptr("#!/bin/sh\n#SBATCH -c -1\n"),
		want: "stdin:2: #SBATCH -c -1: must be a whole number", line: 2},
	"directive unknown option": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --foo\n"},
		want:  `job.sh:2: #SBATCH --foo: unknown option "--foo" (valid options:`, is: getopt.ErrUnknownOption, line: 2},
	"directive typo": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --partiton=x\n"},
		want:  `job.sh:2: #SBATCH --partiton=x: unknown option "--partiton" (did you mean --partition?)`, exact: true, field: "--partiton", line: 2},
	"directive missing value": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -p\n"},
		want:  `job.sh:2: #SBATCH -p: option "-p" requires a value`},
	"directive stray word": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -J my job\n"},
		want:  `job.sh:2: #SBATCH -J my job: unexpected argument "job": a directive line holds only options (quote values that contain spaces)`, exact: true},
	"directive wrap": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --wrap=ls\n"},
		want:  "job.sh:2: #SBATCH --wrap=ls: --wrap is only valid on the command line (a script already holds its commands); remove it from the script", exact: true},
	"directive help": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -h\n"},
		want:  "job.sh:2: #SBATCH -h: --help is only valid on the command line"},
	"directive unterminated quote": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -J \"oops\n"},
		want:  `job.sh:2: #SBATCH -J "oops: unterminated " quote; close it on the same line`, exact: true},
	"directive -N 0": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -N 0\n"},
		want:  "job.sh:2: #SBATCH -N 0: give a node count from 1"},
	"directive unsupported": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --bb=stage\n"},
		want:  "job.sh:2: #SBATCH --bb=stage: corral has no burst buffers", is: ErrRefused, line: 2},
	"directive both memory options": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --mem=1G\n#SBATCH --mem-per-cpu=1G\n"},
		want:  "job.sh:3: #SBATCH --mem-per-cpu=1G: --mem and --mem-per-cpu are mutually exclusive", line: 3},
	"bad directive even when overridden": {args: []string{"--mem=1G", "job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH --mem=4X\n"},
		want:  `job.sh:2: #SBATCH --mem=4X: unknown unit "X"`},
	"CORRAL directive": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#CORRAL --image=\n"},
		want:  "job.sh:2: #CORRAL --image=: empty value", line: 2},
	"directive trailing spaces trimmed": {args: []string{"job.sh"},
		files: map[string]string{"job.sh": "#!/bin/bash\n#SBATCH -t x   \n"},
		want:  `job.sh:2: #SBATCH -t x: "x" is not a whole number`},

	// Ordering: command-line mistakes come before the script is read.
	"command line checked first": {args: []string{"--mem=4X", "missing.sh"},
		want: `--mem=4X: unknown unit "X"`},
}

// TestBadSubmissions is the catalog of submissions Parse must refuse, with
// the message the user sees. want is a substring unless exact is set.
func TestBadSubmissions(t *testing.T) {
	const good = "#!/bin/bash\necho hi\n"
	tests := badSubmissions
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = map[string]string{"job.sh": good}
			}
			c := testContext(files)
			if tc.env != nil {
				c.Env = tc.env
			}
			if tc.stdin != nil {
				c.Stdin = strings.NewReader(*tc.stdin)
			}
			req, err := Parse(tc.args, c)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.args, req)
			}
			msg := err.Error()
			if tc.exact && msg != tc.want {
				t.Errorf("error\n got %q\nwant %q", msg, tc.want)
			}
			if !tc.exact && !strings.Contains(msg, tc.want) {
				t.Errorf("error\n got %q\nwant it to contain %q", msg, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%q, %v) is false", msg, tc.is)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *submit.Error", err)
			}
			if tc.field != "" && e.Field != tc.field {
				t.Errorf("Field = %q, want %q", e.Field, tc.field)
			}
			if tc.line != 0 && e.Line != tc.line {
				t.Errorf("Line = %d, want %d", e.Line, tc.line)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestParseNeedsAnAbsoluteCwd(t *testing.T) {
	c := testContext(map[string]string{"job.sh": basicScript})
	c.Cwd = "relative"
	_, err := Parse([]string{"job.sh"}, c)
	if err == nil || !strings.Contains(err.Error(), `Context.Cwd "relative": the submit directory must be an absolute path`) {
		t.Errorf("Parse with a relative Cwd = %v", err)
	}
}

func TestParseReportsReadErrors(t *testing.T) {
	c := testContext(nil)
	c.ReadFile = func(string) ([]byte, error) { return nil, fs.ErrPermission }
	_, err := Parse([]string{"job.sh"}, c)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "cannot read the batch script: permission denied (check the path)") {
		t.Errorf("Parse = %v, want a permission error", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestParseReportsStdinErrors(t *testing.T) {
	c := testContext(nil)
	c.Stdin = failingReader{}
	_, err := Parse(nil, c)
	if err == nil || !strings.Contains(err.Error(), "cannot read the batch script from standard input: broken pipe") {
		t.Errorf("Parse = %v", err)
	}
}

// TestParseDefaultsNowAndReadFile checks the fallbacks of an empty Context:
// the wall clock for --begin and os.ReadFile for the script.
func TestParseDefaultsNowAndReadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/real.sh", []byte(basicScript), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := Parse([]string{"--begin=now", "real.sh"}, Context{Cwd: dir, User: "bob"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if req.Spec.Script != basicScript || req.Spec.Begin.IsZero() || req.Spec.Name != "real.sh" {
		t.Errorf("Parse = %+v", req.Spec)
	}
}

// manyVars returns n distinct KEY=VALUE entries.
func manyVars(n int) []string {
	env := make([]string, n)
	for i := range env {
		env[i] = "V" + strconv.Itoa(i) + "=x"
	}
	return env
}
