package noded

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/internal/ident"
)

// TestProcessLaunchOptions runs jobs with sbatch's -i, --open-mode=append
// and --propagate through the process runner: the script reads the input
// file, a second run appends to the output of the first, and the script
// sees the limits it was given (a soft limit above the hard one lowered to
// it, and said so in its error file).
func TestProcessLaunchOptions(t *testing.T) {
	spec := testSpec(t, `cat; ulimit -S -n; ulimit -S -c; ulimit -S -s`)
	in := filepath.Join(spec.WorkDir, "in.txt")
	writeTestFile(t, in, "from the input file\n")
	spec.Stdin = in
	spec.AppendOutput = true
	var hard unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &hard); err != nil {
		t.Fatal(err)
	}
	spec.Rlimits = []api.Rlimit{{Name: "CORE", Value: 0}, {Name: "NOFILE", Value: 77}, {Name: "STACK", Value: api.RlimitUnlimited}}
	for run := 0; run < 2; run++ {
		spec.Dir = t.TempDir()
		h, err := NewProcessRunner().Start(context.Background(), spec)
		if err != nil {
			t.Fatalf("run %d: Start: %v", run, err)
		}
		if r := waitResult(t, h, 10*time.Second); r.ExitCode != 0 {
			t.Fatalf("run %d: %+v", run, r)
		}
	}
	stack := "unlimited"
	if hard.Max != unix.RLIM_INFINITY {
		stack = "" // lowered: checked below
	}
	out := readTestFile(t, spec.Stdout)
	one := "from the input file\n77\n0\n"
	if !strings.HasPrefix(out, one) || strings.Count(out, "from the input file") != 2 {
		t.Errorf("output %q: want the input, NOFILE 77 and CORE 0, twice (appended)", out)
	}
	if stack != "" && !strings.Contains(out, "\n"+stack+"\n") {
		t.Errorf("output %q: want STACK %s", out, stack)
	}
	if stack == "" && !strings.Contains(readTestFile(t, spec.Stderr), "--propagate: STACK lowered to") {
		t.Errorf("the error file does not say STACK was lowered: %q", readTestFile(t, spec.Stderr))
	}

	// Truncate (the default) keeps one run's output; a missing input
	// file fails the start, naming the file.
	spec.AppendOutput, spec.Dir = false, t.TempDir()
	h, err := NewProcessRunner().Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitResult(t, h, 10*time.Second)
	if out := readTestFile(t, spec.Stdout); strings.Count(out, "from the input file") != 1 {
		t.Errorf("truncated output %q holds more than one run", out)
	}
	spec.Stdin, spec.Dir = filepath.Join(spec.WorkDir, "missing.txt"), t.TempDir()
	if _, err := NewProcessRunner().Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "cannot open the input file (-i) "+spec.Stdin+": no such file") {
		t.Errorf("a missing input file: %v", err)
	}
}

// TestLoginEnv reads a login shell's environment under the job's: the
// shell's own variables are added, the job's win.
func TestLoginEnv(t *testing.T) {
	home := t.TempDir()
	shell := filepath.Join(home, "loginsh")
	// A "login shell" that sets two variables and runs its -c command.
	writeTestFile(t, shell, "#!/bin/sh\nexport FROM_LOGIN=yes SHARED=login\nshift; shift\nexec /bin/sh -c \"$@\"\n")
	if err := os.Chmod(shell, 0o755); err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	self, err := ident.Lookup(me.Username)
	if err != nil {
		t.Fatal(err)
	}
	self.Home, self.Shell = home, shell
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := withLoginEnv([]string{"SHARED=job", "PATH=/bin"}, self, log)
	joined := strings.Join(env, "\n")
	for _, want := range []string{"FROM_LOGIN=yes", "SHARED=job", "HOME=" + home, "PATH=/bin"} {
		if !strings.Contains(joined+"\n", want+"\n") {
			t.Errorf("environment lacks %s:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "SHARED=login") || strings.Contains(joined, "\nSHLVL=") {
		t.Errorf("the login shell's values won, or its own variables were kept:\n%s", joined)
	}
	self.Shell = "/nonexistent/sh"
	if got := withLoginEnv([]string{"A=1"}, self, log); len(got) != 1 {
		// /bin/sh stands in for a shell that does not exist.
		t.Logf("with /bin/sh: %v", got)
	}
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
