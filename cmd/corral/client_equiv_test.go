//go:build !corral_client

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// The client binary (client.go) holds the user commands from the same
// files as the full binary; these tests keep the two from drifting apart:
// what the client binary links, and what it answers.

// daemonOnlyPackages are packages the client binary must not link: each
// costs every process start-up time, and none serves a user command.
var daemonOnlyPackages = []string{
	"corral/ctld", "corral/noded", "corral/accounting", "corral/sim", "corral/vmimage", "corral/migrate",
	"github.com/hashicorp/raft", "github.com/prometheus/", "github.com/jaypipes/", "github.com/NVIDIA/",
	"github.com/parquet-go/", "go.etcd.io/bbolt", "github.com/digitalocean/", "github.com/google/go-tpm",
	"runtime/cgo",
}

// clientMayLink are packages under a daemon-only prefix that a user
// command needs and that initialise nothing costly: the usage plot of
// `sacct`'s `acct report cluster --svg` (svgo and a rasteriser).
var clientMayLink = map[string]bool{"corral/accounting/usageplot": true}

// buildClientBinary builds the client binary as make build does and
// returns its path.
func buildClientBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), clientBinaryName)
	cmd := exec.Command(goCommand(), "build", "-tags", "corral_client", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if data, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the client binary: %v\n%s", err, data)
	}
	return out
}

// goCommand is the go command of the toolchain running the tests.
func goCommand() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

func TestClientBinaryLinksNoDaemonPackage(t *testing.T) {
	cmd := exec.Command(goCommand(), "list", "-deps", "-tags", "corral_client", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		if clientMayLink[dep] {
			continue
		}
		for _, bad := range daemonOnlyPackages {
			if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
				t.Errorf("the client binary links %s (%s is for the daemons): keep it in a file built with //go:build !corral_client", dep, bad)
			}
		}
	}
	// The check itself must see the packages it looks for: the full
	// binary links them.
	full, err := exec.Command(goCommand(), "list", "-deps", ".").Output()
	if err != nil || !strings.Contains(string(full), "\ncorral/ctld\n") {
		t.Fatalf("go list of the full binary does not show corral/ctld (%v): the check above proves nothing", err)
	}
}

// childResult runs argv through the client binary at bin, as a user's
// shell does (argv[0] is the alias name), with the variables runCLI gives
// in-process commands.
func childResult(t *testing.T, ctx context.Context, bin, addr string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Args = argv
	cmd.Env = []string{"USER=tester", "CORRAL_ADDR=" + addr, "PATH=" + os.Getenv("PATH")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestClientBinaryAnswersAsFull runs the user commands, under their
// Slurm and corral names, through the client binary and through dispatch
// in this process (the full binary's code) against one controller: every
// answer, exit code, standard output and error, must be the same.
func TestClientBinaryAnswersAsFull(t *testing.T) {
	bin := buildClientBinary(t)
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}, {Name: "debug", MaxTime: 1800}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	// One node, in debug only: the jobs below stay pending in batch,
	// so that nothing changes between the two runs of a command.
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, Partitions: []string{"debug"}, Runner: "test", BootID: "b1"}); err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "first", "--mem=64M", "-t", "10", "--wrap", "true"))
	mustRun(t, ctx, addr, "sbatch", "-J", "second", "--array=0-3", "--wrap", "true")

	for _, argv := range [][]string{
		{"corral"}, {"corral", "help"}, {"corral", "version"}, {"corral", "frobnicate"},
		{"sbatch", "--help"}, {"sbatch", "--version"}, {"squeue", "--help"}, {"sinfo", "--help"}, {"scancel", "--help"},
		{"scontrol", "--help"}, {"scontrol"}, {"scontrol", "frobnicate"}, {"sacct", "--help"}, {"sprio", "--help"},
		{"sshare", "--help"}, {"srun", "--help"}, {"sattach", "--help"},
		{"squeue"}, {"squeue", "-l"}, {"squeue", "-r"}, {"squeue", "-o", "%i %j %T %r %P"}, {"squeue", "-t", "all", "-h"},
		{"squeue", "-O", "JobID:8,Name:10,State"}, {"squeue", "-u", "tester"}, {"squeue", "--json"}, {"squeue", "--bogus"},
		{"sinfo"}, {"sinfo", "-N", "-l"}, {"sinfo", "-s"}, {"sinfo", "-o", "%P %D %t"}, {"sinfo", "-R"}, {"sinfo", "--json"}, {"sinfo", "-Z"},
		{"scontrol", "show", "job", job}, {"scontrol", "show", "job"}, {"scontrol", "show", "node", "n1"},
		{"scontrol", "show", "partition"}, {"scontrol", "show", "config"}, {"scontrol", "ping"},
		{"scontrol", "show", "job", "99999"}, {"scontrol", "hold", "99999"},
		{"sacct"}, {"sacct", "-a", "-X"}, {"sprio"}, {"sshare"}, {"sshare", "-l"},
		{"corral", "queue"}, {"corral", "nodes"}, {"corral", "why", job}, {"corral", "prio"}, {"corral", "share"},
		{"corral", "qos", "list"}, {"corral", "account", "list"}, {"corral", "partition", "list"}, {"corral", "config", "show"},
		{"corral", "whoami"}, {"corral", "reservation", "list"}, {"corral", "show", "job", job},
		{"sbatch", "--mem=4X", "--wrap", "true"}, {"sbatch", "--frobnicate", "x.sh"}, {"sbatch"},
		{"scancel"}, {"scancel", "99999"}, {"srun", "--jobid", job, "true"},
	} {
		compareAnswers(t, ctx, bin, addr, argv, nil)
	}

	// Commands that change a job run on a job of their own on each side;
	// its id is the one difference allowed.
	steps := [][]string{
		{"scontrol", "hold", "ID"}, {"squeue", "-j", "ID", "-o", "%i %T %r"}, {"scontrol", "release", "ID"},
		{"scontrol", "update", "JobId=ID", "TimeLimit=5"}, {"squeue", "-j", "ID", "-o", "%i %l"},
		{"scancel", "ID"}, {"scancel", "ID"}, {"squeue", "-h", "-j", "ID"},
	}
	var ids [2]string
	for side := range ids {
		argv := []string{"sbatch", "--parsable", "-J", "mine", "--wrap", "true"}
		var r result
		if side == 0 {
			r = runCLI(t, ctx, addr, argv...)
		} else {
			r = childResult(t, ctx, bin, addr, argv...)
		}
		if r.code != 0 || !regexp.MustCompile(`^\d+\n$`).MatchString(r.stdout) {
			t.Fatalf("%s (side %d): exit %d, stdout %q, stderr %q", strings.Join(argv, " "), side, r.code, r.stdout, r.stderr)
		}
		ids[side] = strings.TrimSpace(r.stdout)
	}
	for _, step := range steps {
		compareAnswers(t, ctx, bin, addr, step, &ids)
	}
}

// compareAnswers runs argv in this process and through the client binary
// and fails the test unless both answer alike. With ids, "ID" in argv is
// each side's own job, and the answers are compared with it named "ID".
// A listing that changed between the two runs (a time column ticking) is
// run in this process once more.
func compareAnswers(t *testing.T, ctx context.Context, bin, addr string, argv []string, ids *[2]string) {
	t.Helper()
	name := strings.Join(argv, " ")
	withID := func(side int) []string {
		if ids == nil {
			return argv
		}
		out := make([]string, len(argv))
		for i, a := range argv {
			out[i] = strings.ReplaceAll(a, "ID", ids[side])
		}
		return out
	}
	norm := func(side int, r result) result {
		if ids != nil {
			re := regexp.MustCompile(`\b` + ids[side] + `\b`)
			r.stdout, r.stderr = re.ReplaceAllString(r.stdout, "ID"), re.ReplaceAllString(r.stderr, "ID")
		}
		return r
	}
	full := norm(0, runCLI(t, ctx, addr, withID(0)...))
	client := norm(1, childResult(t, ctx, bin, addr, withID(1)...))
	if full == client {
		return
	}
	if ids == nil {
		if again := runCLI(t, ctx, addr, argv...); again == client {
			return
		}
	}
	t.Errorf("%s: the client binary answers\n  exit %d\n  stdout %q\n  stderr %q\nthe full binary\n  exit %d\n  stdout %q\n  stderr %q",
		name, client.code, client.stdout, client.stderr, full.code, full.stdout, full.stderr)
}

// TestAliasesRunTheClientBinary installs the aliases from the client
// binary and runs the Slurm commands through the symlinks, as a user's
// shell finds them on PATH: each must resolve to the client binary and
// answer as the same command run in this process (the full binary's
// code), and a job submitted through sbatch must be the one squeue,
// scontrol and scancel then see.
func TestAliasesRunTheClientBinary(t *testing.T) {
	bin := buildClientBinary(t)
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "bin")
	if r := childResult(t, ctx, bin, addr, "corral", "install-aliases", dir); r.code != 0 {
		t.Fatalf("corral-client install-aliases: exit %d, %s", r.code, r.stderr)
	}
	for name := range slurmAliases {
		if got, err := filepath.EvalSymlinks(filepath.Join(dir, name)); err != nil || got != bin {
			t.Errorf("%s resolves to %q (%v), want the client binary %s", name, got, err, bin)
		}
	}
	// run execs the symlink itself, with the name the user typed.
	run := func(argv ...string) result {
		link := filepath.Join(dir, argv[0])
		return childResult(t, ctx, link, addr, append([]string{link}, argv[1:]...)...)
	}
	r := run("sbatch", "--parsable", "-J", "viaalias", "--begin", "now+600", "--wrap", "true")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^\d+$`).MatchString(id) {
		t.Fatalf("sbatch --parsable through the alias: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run("squeue", "-h", "-j", id, "-o", "%i %j %T"); r.stdout != id+" viaalias PENDING\n" {
		t.Errorf("squeue through the alias: %q (stderr %q), want %q", r.stdout, r.stderr, id+" viaalias PENDING\n")
	}
	for _, argv := range [][]string{
		{"squeue"}, {"sinfo"}, {"scontrol", "show", "job", id}, {"sacct", "-j", id, "-X"}, {"sprio"}, {"sshare"},
		{"squeue", "--bogus"},
	} {
		alias, inProcess := run(argv...), runCLI(t, ctx, addr, argv...)
		if alias != inProcess {
			if again := runCLI(t, ctx, addr, argv...); again != alias {
				t.Errorf("%s through the alias: exit %d, stdout %q, stderr %q; in process: exit %d, stdout %q, stderr %q",
					strings.Join(argv, " "), alias.code, alias.stdout, alias.stderr, inProcess.code, inProcess.stdout, inProcess.stderr)
			}
		}
	}
	if r := run("scancel", id); r.code != 0 {
		t.Fatalf("scancel through the alias: exit %d, %s", r.code, r.stderr)
	}
	if r := run("squeue", "-h", "-t", "all", "-j", id, "-o", "%T"); r.stdout != "CANCELLED\n" {
		t.Errorf("squeue after scancel through the alias: %q (stderr %q), want CANCELLED", r.stdout, r.stderr)
	}
}
