//go:build corral_client

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"corral/internal/authd"
)

// These tests run the package's tests against the client binary's build
// (go test -tags corral_client ./cmd/corral): the same tests as the full
// binary's, less those of the daemons. The commands the client binary
// hands to the full one reach a full binary built here, run as a child
// (a test process cannot replace itself), with the variables the test
// gave the command.

func TestMain(m *testing.M) {
	os.Exit(runWithFullBinary(m))
}

// runWithFullBinary builds the full binary next to the test binary, where
// runFull looks for it, and runs the tests.
func runWithFullBinary(m *testing.M) int {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot find the test binary:", err)
		return 1
	}
	full := filepath.Join(filepath.Dir(self), fullBinaryName)
	build := exec.Command(goTool(), "build", "-o", full, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the full binary: %v\n%s", err, out)
		return 1
	}
	defer os.Remove(full)
	vars, err := cliVariables()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	execFull = func(env *cliEnv, path string) error {
		cmd := &exec.Cmd{Path: path, Args: env.argv, Stdin: env.stdin, Stdout: env.stdout, Stderr: env.stderr,
			Env: childEnv(env, vars)}
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exitStatus(exit.ExitCode())
		}
		return err
	}
	return m.Run()
}

// goTool is the go command that runs these tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// cliVariables lists the environment variables the commands read through
// cliEnv.getenv, from this package's sources, so that a variable added
// later reaches the full binary too.
func cliVariables() ([]string, error) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`getenv\("([A-Z0-9_]+)"\)`)
	seen := map[string]bool{authd.SocketEnv: true}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			seen[m[1]] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	return names, nil
}

// childEnv is this process's environment less the CLI's variables, plus
// those env's command sees.
func childEnv(env *cliEnv, names []string) []string {
	var out []string
	ours := map[string]bool{}
	for _, n := range names {
		ours[n] = true
		if v := env.getenv(n); v != "" {
			out = append(out, n+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !ours[name] {
			out = append(out, kv)
		}
	}
	return out
}

// TestClientHandsOffToFullBinary checks both ends of the hand-over: a
// daemon's command runs in the full binary, and without one installed
// next to the client the command says where it should be.
func TestClientHandsOffToFullBinary(t *testing.T) {
	ctx := context.Background()
	r := runCLI(t, ctx, "", "corral", "ctld", "--id", "c1")
	if r.code != 1 || !strings.Contains(r.stderr, "corral: error: ctld: --data is required") {
		t.Fatalf("corral ctld without options in the client binary: exit %d, stderr %q; want the full binary's usage error", r.code, r.stderr)
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	full := filepath.Join(filepath.Dir(self), fullBinaryName)
	if err := os.Rename(full, full+".away"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(full+".away", full)
	r = runCLI(t, ctx, "", "sacct", "export", "--format", "csv", "-o", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "sacct: error: this command needs the full corral binary") || !strings.Contains(r.stderr, full) {
		t.Fatalf("sacct export without the full binary: exit %d, stderr %q; want 1 naming %s", r.code, r.stderr, full)
	}
}
