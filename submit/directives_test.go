package submit

import (
	"reflect"
	"strings"
	"testing"

	"corral/api"
)

// directiveCase is a script (submitted as job.sh after args) and how its
// directives change the request from baseSpec.
type directiveCase struct {
	script string
	args   []string // before job.sh
	want   func(s *api.JobSpec)
	req    func(r *Request)
}

var directiveCases = map[string]directiveCase{
	"directives apply": {
		script: "#!/bin/bash\n#SBATCH -J train\n#SBATCH --partition=gpu\n#SBATCH -t 30\necho\n",
		want: func(s *api.JobSpec) {
			s.Name, s.Partition, s.TimeLimit = "train", "gpu", 1800
		},
	},
	"several options on one line": {
		script: "#!/bin/bash\n#SBATCH -n 4 -c 2 --mem=1G\n",
		want:   func(s *api.JobSpec) { s.NTasks, s.CPUsPerTask, s.MemPerNode = 4, 2, 1024 },
	},
	"CORRAL prefix": {
		script: "#!/bin/bash\n#CORRAL --image=debian-12\n#SBATCH -p vm\n",
		want:   func(s *api.JobSpec) { s.Image, s.Partition = "debian-12", "vm" },
	},
	"command line wins": {
		script: "#!/bin/bash\n#SBATCH -p script\n#SBATCH -t 10\n#SBATCH -J fromscript\n",
		args:   []string{"-p", "cli", "--time=20"},
		want:   func(s *api.JobSpec) { s.Partition, s.TimeLimit, s.Name = "cli", 1200, "fromscript" },
	},
	"later directive wins": {
		script: "#!/bin/bash\n#SBATCH -p first\n#SBATCH -p second\n",
		want:   func(s *api.JobSpec) { s.Partition = "second" },
	},
	"command line flag beats directive flag": {
		script: "#!/bin/bash\n#SBATCH --requeue\n",
		args:   []string{"--no-requeue"},
	},
	"stops at the first command": {
		script: "#!/bin/bash\n#SBATCH -p early\necho start\n#SBATCH -p late\n",
		want:   func(s *api.JobSpec) { s.Partition = "early" },
	},
	"blank lines and comments are skipped": {
		script: "#!/bin/bash\n\n   \n# a comment\n\t# indented comment\n#SBATCH -p after-comments\n",
		want:   func(s *api.JobSpec) { s.Partition = "after-comments" },
	},
	"indented SBATCH is a comment": {
		script: "#!/bin/bash\n  #SBATCH -p ignored\n#SBATCH -n 2\n",
		want:   func(s *api.JobSpec) { s.NTasks = 2 },
	},
	"lower-case sbatch is a comment": {
		script: "#!/bin/bash\n#sbatch -p ignored\n",
	},
	"magic word must end": {
		script: "#!/bin/bash\n#SBATCHX -p ignored\n#SBATCH\n",
	},
	"option right after the magic word, as sbatch reads it": {
		script: "#!/bin/bash\n#SBATCH--time=1\n#CORRAL-p nospace\n",
		want:   func(s *api.JobSpec) { s.TimeLimit, s.Partition = 60, "nospace" },
	},
	"tab after magic word": {
		script: "#!/bin/bash\n#SBATCH\t-p tabbed\n",
		want:   func(s *api.JobSpec) { s.Partition = "tabbed" },
	},
	"trailing comment": {
		script: "#!/bin/bash\n#SBATCH -p debug # the fast one\n",
		want:   func(s *api.JobSpec) { s.Partition = "debug" },
	},
	"hash inside a word is kept": {
		script: "#!/bin/bash\n#SBATCH --comment=run#3\n",
		want:   func(s *api.JobSpec) { s.Comment = "run#3" },
	},
	"double quotes": {
		script: "#!/bin/bash\n#SBATCH -J \"my job\" --comment=\"a # b\"\n",
		want:   func(s *api.JobSpec) { s.Name, s.Comment = "my job", "a # b" },
	},
	"single quotes": {
		script: "#!/bin/bash\n#SBATCH --comment='say \"hi\"'\n",
		want:   func(s *api.JobSpec) { s.Comment = `say "hi"` },
	},
	"first line is never a directive": {
		script: "#!/bin/bash\n",
	},
	"shebang with SBATCH text": {
		script: "#!/bin/bash #SBATCH -p nope\n",
		want:   func(s *api.JobSpec) { s.Script = "#!/bin/bash #SBATCH -p nope\n" },
	},
	"no trailing newline": {
		script: "#!/bin/bash\n#SBATCH -p last",
		want:   func(s *api.JobSpec) { s.Partition = "last" },
	},
	"prefixes resolve in directives": {
		script: "#!/bin/bash\n#SBATCH --part=gpu --cpus-per-t=3\n",
		want:   func(s *api.JobSpec) { s.Partition, s.CPUsPerTask = "gpu", 3 },
	},
	"chdir from the script": {
		script: "#!/bin/bash\n#SBATCH -D out\n",
		want:   func(s *api.JobSpec) { s.WorkDir = "/home/alice/proj/out" },
	},
	"chdir from the command line wins": {
		script: "#!/bin/bash\n#SBATCH -D out\n",
		args:   []string{"-D", "/tmp"},
		want:   func(s *api.JobSpec) { s.WorkDir = "/tmp" },
	},
	"export from the script": {
		script: "#!/bin/bash\n#SBATCH --export=NONE\n",
		want:   func(s *api.JobSpec) { s.Env = nil },
	},
	"export from the command line wins": {
		script: "#!/bin/bash\n#SBATCH --export=NONE\n",
		args:   []string{"--export=PATH"},
		want:   func(s *api.JobSpec) { s.Env = []string{"PATH=/usr/bin"} },
	},
	"parsable and wait in the script": {
		script: "#!/bin/bash\n#SBATCH --parsable -W\n",
		req:    func(r *Request) { r.Parsable, r.Wait = true, true },
	},
	"cli --mem replaces script --mem-per-cpu": {
		script: "#!/bin/bash\n#SBATCH --mem-per-cpu=1G\n",
		args:   []string{"--mem=8G"},
		want:   func(s *api.JobSpec) { s.MemPerNode = 8192 },
	},
	"cli --mem-per-cpu replaces script --mem": {
		script: "#!/bin/bash\n#SBATCH --mem=8G\n",
		args:   []string{"--mem-per-cpu=2G"},
		want:   func(s *api.JobSpec) { s.MemPerCPU = 2048 },
	},
	"script --mem alone stays": {
		script: "#!/bin/bash\n#SBATCH --mem=8G\n",
		args:   []string{"-n", "2"},
		want:   func(s *api.JobSpec) { s.MemPerNode, s.NTasks = 8192, 2 },
	},
	"array and dependency from the script": {
		script: "#!/bin/bash\n#SBATCH -a 1-4%2\n#SBATCH -d singleton\n",
		want: func(s *api.JobSpec) {
			s.Array = &api.ArraySpec{Raw: "1-4%2", Throttle: 2, Ranges: []api.ArrayRange{{First: 1, Last: 4, Step: 1}}}
			s.Dependency = &api.Dependency{Raw: "singleton", Clauses: []api.DepClause{{Type: "singleton"}}}
		},
	},
	"empty directive": {
		script: "#!/bin/bash\n#SBATCH   \n#SBATCH # just a comment\n",
	},
	"hold and nice from the script": {
		script: "#!/bin/bash\n#SBATCH -H --nice\n",
		want:   func(s *api.JobSpec) { s.Hold, s.Nice = true, 100 },
	},
}

func TestDirectives(t *testing.T) {
	tests := directiveCases
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append(append([]string(nil), tc.args...), "job.sh")
			got, err := Parse(args, testContext(map[string]string{"job.sh": tc.script}))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := &Request{Spec: baseSpec(), ScriptPath: "job.sh"}
			want.Spec.Script = tc.script
			if tc.want != nil {
				tc.want(&want.Spec)
			}
			if tc.req != nil {
				tc.req(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestSplitDirective(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"empty":            {"", nil},
		"blanks":           {" \t ", nil},
		"words":            {" -p  debug\t-n 2", []string{"-p", "debug", "-n", "2"}},
		"comment":          {" -p x #  -n 2", []string{"-p", "x"}},
		"comment at start": {" # nothing", nil},
		"hash in word":     {" --comment=a#b", []string{"--comment=a#b"}},
		"double quotes":    {` -J "a b"`, []string{"-J", "a b"}},
		"quotes mid word":  {` --comment="a b"c`, []string{"--comment=a bc"}},
		"single quotes":    {` -J 'a "b"'`, []string{"-J", `a "b"`}},
		"empty quotes":     {` --comment=""`, []string{"--comment="}},
		"empty word":       {` ''`, []string{""}},
		"quoted hash":      {` "#x"`, []string{"#x"}},
		"backslash kept":   {` a\ b`, []string{`a\`, "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := splitDirective(tc.in)
			if err != nil {
				t.Fatalf("splitDirective(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("splitDirective(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSplitDirectiveUnterminated(t *testing.T) {
	for _, in := range []string{` -J "a b`, ` -J 'a`} {
		if _, err := splitDirective(in); err == nil || !strings.Contains(err.Error(), "unterminated") {
			t.Errorf("splitDirective(%q) = %v, want an unterminated-quote error", in, err)
		}
	}
}
