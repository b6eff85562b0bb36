package submit

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// The fuzz targets below run their seeds in every `go test`; `make fuzz`
// runs each for FUZZTIME. Each checks that a parser never panics and that
// what it accepts keeps the promises its callers rely on.

var fuzzNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// FuzzParse feeds sbatch a script (its #SBATCH lines) and a command line.
func FuzzParse(f *testing.F) {
	seeds := []struct{ script, args string }{
		{"#!/bin/sh\n#SBATCH -J x -t 10 --mem=1G\necho hi\n", "-n 2"},
		{"#!/bin/bash\n#SBATCH --array=0-15:4%2\n#SBATCH -d afterok:12:13\n", "--export=ALL,A=1"},
		{"#!/bin/sh\n#SBATCH --gres=gpu:a100:2 --hugepages=2M:4\n#CORRAL --numa=strict\n", ""},
		{"#!/bin/sh\n#SBATCH --begin=now+1hour -o out-%j.txt\n", "--wrap"},
		{"#!/bin/sh\n#SBATCH--time=1\n#SBATCH -J 'a b' # comment\n", "-p debug"},
		{"no shebang", ""},
		{"#!/bin/sh\n#SBATCH -N 2-4 --ntasks-per-node=2 -C 'intel&[r1|r2]'\n", "-w n[1-2] -x n9 --exclusive -m cyclic"},
	}
	for _, s := range seeds {
		f.Add(s.script, s.args)
	}
	f.Fuzz(func(t *testing.T, script, args string) {
		ctx := Context{
			Env: []string{"PATH=/bin", "HOME=/home/u"}, Cwd: "/home/u", User: "u", Now: fuzzNow,
			ReadFile: func(path string) ([]byte, error) {
				if path != "/home/u/job.sh" {
					return nil, fs.ErrNotExist
				}
				return []byte(script), nil
			},
		}
		argv := append(strings.Fields(args), "job.sh")
		req, err := Parse(argv, ctx)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) && !errors.Is(err, ErrHelp) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Parse returned %T %v, want a *submit.Error", err, err)
			}
			return
		}
		sp := req.Spec
		if sp.CPUs() < 1 || sp.MemMB() < 0 || sp.TimeLimit < 0 {
			t.Fatalf("accepted a spec with CPUs %d, memory %d, time limit %d", sp.CPUs(), sp.MemMB(), sp.TimeLimit)
		}
		if a := sp.Array; a != nil && a.Count() < 1 {
			t.Fatalf("accepted --array=%s that names no task", a.Raw)
		}
	})
}

func FuzzParseTimeLimit(f *testing.F) {
	for _, s := range []string{"10", "1:30", "1:02:03", "2-12", "2-12:30", "2-12:30:15", "UNLIMITED", "-1", "99999999999", "1::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		secs, err := ParseTimeLimit(s)
		if err != nil {
			return
		}
		if secs < 0 {
			t.Fatalf("ParseTimeLimit(%q) = %d, negative", s, secs)
		}
		// What squeue prints must read back as the same limit.
		if back, err := ParseTimeLimit(FormatTimeLimit(secs)); err != nil || back != secs {
			t.Fatalf("ParseTimeLimit(%q) = %d; FormatTimeLimit gives %q, which reads back as %d, %v",
				s, secs, FormatTimeLimit(secs), back, err)
		}
	})
}

func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"4G", "512", "1.5T", "0", "4X", "-1G", "99999999999999999999K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if mib, err := ParseMemory(s); err == nil && mib < 0 {
			t.Fatalf("ParseMemory(%q) = %d, negative", s, mib)
		}
	})
}

func FuzzParseBegin(f *testing.F) {
	for _, s := range []string{"now+1hour", "now", "16:00", "2026-12-24", "2026-12-24T08:30:00", "midnight", "tomorrow", "now+99999999999w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseBegin(s, fuzzNow)
	})
}

func FuzzParseGres(f *testing.F) {
	for _, s := range []string{"gpu:2", "gpu:a100:4", "gpu:1g.10gb:2,vf:1", "gpu", "gpu:-5", "gpu:a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gres, err := ParseGres(s)
		if err != nil {
			return
		}
		for _, g := range gres {
			if g.Count < 1 || g.Name == "" {
				t.Fatalf("ParseGres(%q) gave %+v", s, g)
			}
		}
	})
}

func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"0-15:4%2", "1,3,5-7", "0-1000000", "10-5", "0-9:0", "5%", "0-1099511627776,1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArray(s)
		if err != nil {
			return
		}
		for _, r := range a.Ranges {
			if r.Step < 1 || r.First < 0 || r.Last < r.First || r.Last > MaxArrayIndex {
				t.Fatalf("ParseArray(%q) gave range %+v", s, r)
			}
		}
		if a.Throttle < 0 || a.Count() < 1 {
			t.Fatalf("ParseArray(%q): throttle %d, %d tasks", s, a.Throttle, a.Count())
		}
	})
}

func FuzzParseDependency(f *testing.F) {
	for _, s := range []string{"afterok:12:13,after:14+5", "singleton", "afterany:12_3?afternotok:9", "12:13", "afterwards:1", "after:1+-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDependency(s)
		if err != nil {
			return
		}
		if d.Raw != s || len(d.Clauses) == 0 {
			t.Fatalf("ParseDependency(%q) = %+v", s, d)
		}
		for _, c := range d.Clauses {
			known := false
			for _, typ := range dependencyTypes {
				known = known || typ == c.Type
			}
			if !known || c.Minutes < 0 {
				t.Fatalf("ParseDependency(%q) gave clause %+v", s, c)
			}
			for _, id := range c.JobIDs {
				if !validJobID(id) {
					t.Fatalf("ParseDependency(%q) gave job id %q", s, id)
				}
			}
		}
	})
}

func FuzzExportEnv(f *testing.F) {
	for _, s := range []string{"ALL", "NONE", "ALL,A=1,B", "A=1,B=2", "", "=x", "ALL,PATH"} {
		f.Add(s, "PATH=/bin\x00HOME=/h\x00B=2")
	}
	f.Fuzz(func(t *testing.T, value, env string) {
		out, err := ExportEnv(value, strings.Split(env, "\x00"))
		if err != nil {
			return
		}
		for _, e := range out {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				t.Fatalf("ExportEnv(%q) exported %q, not KEY=VALUE", value, e)
			}
		}
	})
}

// FuzzParseConstraint reads any text as a --constraint. What it accepts
// names at most MaxConstraintFeatures features, each a valid feature name,
// needs between 1 and MaxNodes nodes, and reads the same again once its
// every-node part is written back out.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range []string{"intel&ib", "a|b", "(a|b)&c*2", "[r1|r2]&x", "[a*2&(b|c)*4]", "a&&", "((((a))))", "[a*0]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraint(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Field != "--constraint" {
				t.Fatalf("ParseConstraint(%q): %v is not an *Error naming --constraint", s, err)
			}
			return
		}
		names := c.Features()
		if len(names) == 0 || len(names) > MaxConstraintFeatures {
			t.Fatalf("ParseConstraint(%q) names %d features", s, len(names))
		}
		for _, n := range names {
			if why := FeatureProblem(n); why != "" {
				t.Fatalf("ParseConstraint(%q) took feature %q, which %s", s, n, why)
			}
		}
		if n := c.NodesNeeded(); n < 1 || n > MaxNodes*MaxConstraintFeatures {
			t.Fatalf("ParseConstraint(%q) needs %d nodes", s, n)
		}
		if c.All != nil {
			again, err := ParseConstraint(c.All.String())
			if err != nil || again.All == nil || again.All.String() != c.All.String() {
				t.Fatalf("ParseConstraint(%q): its every-node part %q reads back as %v, %v", s, c.All.String(), again, err)
			}
		}
	})
}
