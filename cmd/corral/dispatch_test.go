package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld"
)

// result is what one dispatch call left behind.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI calls dispatch the way main does, with CORRAL_ADDR set to addr
// (when not empty) and USER set to tester.
func runCLI(t *testing.T, ctx context.Context, addr string, argv ...string) result {
	t.Helper()
	vars := map[string]string{"USER": "tester"}
	if addr != "" {
		vars["CORRAL_ADDR"] = addr
	}
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(k string) string { return vars[k] }}
	code := dispatch(ctx, env, argv)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startController runs a single-member controller in this process on
// ephemeral 127.0.0.1 ports and returns its URL once it leads.
func startController(t *testing.T, parts []api.Partition) string {
	t.Helper()
	raftAddr := freeAddr(t)
	c, err := ctld.New(ctld.Config{
		ID: "c1", RaftAddr: raftAddr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "c1"),
		Peers: []ctld.Peer{{ID: "c1", Addr: raftAddr}}, Partitions: parts, NodeTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := "http://" + c.HTTPAddr()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := cl.Status(context.Background())
		if err == nil && st.State == "Leader" {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller at %s did not lead within 10s: %+v %v", addr, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDispatchHelpAndUnknownCommands(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		argv       []string
		code       int
		stdout     []string // substrings stdout must hold
		stderr     []string // substrings stderr must hold
		noStdout   []string
		emptyError bool
	}{
		"empty argv": {argv: nil, stdout: []string{"usage: corral COMMAND"}, emptyError: true},
		"no arguments": {argv: []string{"corral"}, code: 0,
			stdout: []string{"usage: corral COMMAND", "submit", "queue", "install-aliases", "CORRAL_ADDR"}, emptyError: true},
		"--help":          {argv: []string{"/usr/local/bin/corral", "--help"}, stdout: []string{"usage: corral COMMAND"}, emptyError: true},
		"-h":              {argv: []string{"corral", "-h"}, stdout: []string{"usage: corral COMMAND"}, emptyError: true},
		"help":            {argv: []string{"corral", "help"}, stdout: []string{"usage: corral COMMAND"}, emptyError: true},
		"version":         {argv: []string{"corral", "version"}, stdout: []string{"corral " + version}, emptyError: true},
		"unknown command": {argv: []string{"corral", "frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`, "corral help"}},
		"unknown program name runs as corral": {argv: []string{"/opt/bin/corral-1.2", "frobnicate"}, code: 2,
			stderr: []string{`unknown command "frobnicate"`}},
		"sbatch --help": {argv: []string{"/usr/bin/sbatch", "--help"}, stdout: []string{"Usage: corral submit", "--wrap"}, emptyError: true},
		"squeue --help": {argv: []string{"squeue", "--help"}, stdout: []string{"usage: squeue [options]", "--noheader", "--states"},
			noStdout: []string{"squeue queue"}, emptyError: true},
		"sinfo --help": {argv: []string{"sinfo", "--help"}, stdout: []string{"usage: sinfo [options]", "--Node"},
			noStdout: []string{"sinfo nodes"}, emptyError: true},
		"scancel --help":      {argv: []string{"scancel", "--help"}, stdout: []string{"usage: scancel [options]", "--user"}, emptyError: true},
		"corral queue --help": {argv: []string{"corral", "queue", "--help"}, stdout: []string{"usage: corral queue [options]"}, emptyError: true},
		"scontrol show --help": {argv: []string{"scontrol", "show", "--help"}, stdout: []string{"usage: scontrol show [options]", "--json"},
			emptyError: true},
		"scontrol --help":        {argv: []string{"scontrol", "--help"}, stdout: []string{"usage: scontrol", "show job", "hold", "release"}, emptyError: true},
		"scontrol alone":         {argv: []string{"scontrol"}, code: 2, stderr: []string{"give a command"}},
		"scontrol frobnicate":    {argv: []string{"scontrol", "frobnicate", "JobId=1"}, code: 2, stderr: []string{`"frobnicate" is not supported`}},
		"squeue bad option":      {argv: []string{"squeue", "--bogus"}, code: 2, stderr: []string{"squeue: error:", "--bogus"}},
		"sinfo bad option":       {argv: []string{"sinfo", "-Z"}, code: 2, stderr: []string{"sinfo: error:"}},
		"sbatch bad option":      {argv: []string{"sbatch", "--frobnicate", "x.sh"}, code: 2, stderr: []string{"sbatch: error:", "--frobnicate"}},
		"sbatch bad memory":      {argv: []string{"sbatch", "--mem=4X", "--wrap", "true"}, code: 1, stderr: []string{`unknown unit "X"`}},
		"squeue bad state":       {argv: []string{"squeue", "-t", "R,XX"}, code: 1, stderr: []string{`squeue: error: Invalid job state specified: XX (valid states: all, PENDING (PD), RUNNING (R)`}},
		"squeue bad job id":      {argv: []string{"squeue", "-j", "abc"}, code: 1, stderr: []string{`"abc" is not a job id`}},
		"scancel nothing":        {argv: []string{"scancel"}, code: 1, stderr: []string{"no job specified"}},
		"scancel bad id":         {argv: []string{"scancel", "12x"}, code: 1, stderr: []string{`"12x" is not a job id`}},
		"scancel bad state":      {argv: []string{"scancel", "-t", "nope", "-u", "tester"}, code: 1, stderr: []string{`--state: unknown job state "nope"`}},
		"hold without ids":       {argv: []string{"corral", "hold"}, code: 1, stderr: []string{"give the job ids"}},
		"exec without a job":     {argv: []string{"corral", "exec"}, code: 1, stderr: []string{"give a job id and a command"}},
		"exec without a command": {argv: []string{"corral", "exec", "12", "--"}, code: 1, stderr: []string{"exec into job 12", "no command given"}},
		"exec bad job id":        {argv: []string{"corral", "exec", "x12", "--", "true"}, code: 1, stderr: []string{`"x12" is not a job id`}},
		"exec bad env":           {argv: []string{"corral", "exec", "-e", "=x", "12", "true"}, code: 1, stderr: []string{"env", "NAME=VALUE"}},
		"salloc --help":          {argv: []string{"/usr/bin/salloc", "--help"}, stdout: []string{"usage: salloc [sbatch options]"}, emptyError: true},
		"salloc bad option":      {argv: []string{"salloc", "--bogus", "sh"}, code: 2, stderr: []string{"salloc: error:", "--bogus"}},
		"srun bad -n":            {argv: []string{"srun", "--jobid=3", "-n", "x", "hostname"}, code: 1, stderr: []string{"--ntasks=x: give a whole number"}},
		"srun no command":        {argv: []string{"srun", "-n", "2"}, code: 1, stderr: []string{"give a command to run"}},
		"srun --mpi=pmix":        {argv: []string{"srun", "--jobid=3", "--mpi=pmix", "true"}, code: 1, stderr: []string{"not PMIx"}},
		"srun --help":            {argv: []string{"srun", "--help"}, stdout: []string{"usage: srun [options]", "--jobid", "--overlap", "--pty"}, emptyError: true},
		"cp without a job":       {argv: []string{"corral", "cp", "a", "b"}, code: 1, stderr: []string{"exactly one of the two must be in a job"}},
		"cp both in jobs":        {argv: []string{"corral", "cp", "1:a", "2:b"}, code: 1, stderr: []string{"exactly one"}},
		"cp with ..":             {argv: []string{"corral", "cp", "12:../x", "."}, code: 1, stderr: []string{`may not hold ".."`}},
		"scancel bad signal":     {argv: []string{"scancel", "--signal=FOO", "12"}, code: 1, stderr: []string{`--signal: signal "FOO": unknown`}},
		"scancel signal 99":      {argv: []string{"scancel", "-s", "99", "12"}, code: 1, stderr: []string{"from 1 to 64"}},
		"sattach --help":         {argv: []string{"sattach", "--help"}, stdout: []string{"usage: sattach [options]"}, emptyError: true},
		"scontrol hold zero":     {argv: []string{"scontrol", "hold", "0"}, code: 1, stderr: []string{"scontrol: error:", `"0" is not a job id`}},
		"show without kind":      {argv: []string{"corral", "show"}, code: 1, stderr: []string{"usage: corral show job"}},
		"show bad kind":          {argv: []string{"corral", "show", "bogus"}, code: 1, stderr: []string{"usage: corral show job"}},
		"node bad verb":          {argv: []string{"corral", "node", "reboot", "n1"}, code: 1, stderr: []string{"usage: corral node drain"}},
		"node missing name":      {argv: []string{"corral", "node", "drain"}, code: 1, stderr: []string{"usage: corral node drain"}},
		"install-aliases without dir": {argv: []string{"corral", "install-aliases"}, code: 1,
			stderr: []string{"give one directory"}},
		"ctld without id":         {argv: []string{"corral", "ctld"}, code: 1, stderr: []string{"--id is required"}},
		"ctld bad partitions":     {argv: []string{"corral", "ctld", "--id", "c1", "--data", "d", "--raft", "r", "--http", "h", "--partitions", "batch:xx"}, code: 1, stderr: []string{"--partitions: batch"}},
		"ctld bad node timeout":   {argv: []string{"corral", "ctld", "--id", "c1", "--data", "d", "--raft", "r", "--http", "h", "--node-timeout", "soon"}, code: 1, stderr: []string{"--node-timeout=soon"}},
		"ctld bad log level":      {argv: []string{"corral", "ctld", "--id", "c1", "--data", "d", "--raft", "r", "--http", "h", "--log-level", "loud"}, code: 1, stderr: []string{`--log-level "loud"`}},
		"ctld option needs value": {argv: []string{"corral", "ctld", "--id"}, code: 2, stderr: []string{"--id"}},
		"noded without data":      {argv: []string{"corral", "noded", "--name", "n1"}, code: 1, stderr: []string{"--data is required"}},
		"noded bad cpus":          {argv: []string{"corral", "noded", "--name", "n1", "--data", "d", "--ctld", "127.0.0.1:1", "--cpus", "0"}, code: 1, stderr: []string{"--cpus=0"}},
		"noded bad runner":        {argv: []string{"corral", "noded", "--name", "n1", "--data", "d", "--ctld", "127.0.0.1:1", "--runner", "docker"}, code: 1, stderr: []string{"--runner=docker", "process, vm"}},
		"noded bad overlay":       {argv: []string{"corral", "noded", "--name", "n1", "--data", "d", "--ctld", "127.0.0.1:1", "--overlay", "192.0.2.1"}, code: 1, stderr: []string{"--overlay=192.0.2.1", "a UDP port", "or none"}},
		"noded vm without images": {argv: []string{"corral", "noded", "--name", "n1", "--data", "d", "--ctld", "127.0.0.1:1", "--runner", "vm", "--images", "/nonexistent"}, code: 1, stderr: []string{"make image"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// No server: every case must end before it needs one.
			r := runCLI(t, ctx, "http://127.0.0.1:1", tc.argv...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout does not hold %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tc.noStdout {
				if strings.Contains(r.stdout, s) {
					t.Errorf("stdout holds %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr does not hold %q:\n%s", s, r.stderr)
				}
			}
			if tc.emptyError && r.stderr != "" {
				t.Errorf("stderr %q, want nothing", r.stderr)
			}
		})
	}
}

func TestDispatchUsageListsEveryCommand(t *testing.T) {
	r := runCLI(t, context.Background(), "", "corral")
	for name, cmd := range commands {
		if !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, cmd.summary) {
			t.Errorf("usage does not list %s (%s):\n%s", name, cmd.summary, r.stdout)
		}
	}
}

func TestDispatchWithoutController(t *testing.T) {
	t.Run("nothing listens", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		r := runCLI(t, ctx, "http://"+freeAddr(t), "squeue")
		if r.code != 1 || !strings.HasPrefix(r.stderr, "squeue: error:") {
			t.Fatalf("exit %d, stderr %q; want 1 and squeue: error:", r.code, r.stderr)
		}
	})
	t.Run("empty CORRAL_ADDR list", func(t *testing.T) {
		r := runCLI(t, context.Background(), " , ", "corral", "status")
		if r.code != 1 || !strings.Contains(r.stderr, "set CORRAL_ADDR") {
			t.Fatalf("exit %d, stderr %q; want 1 and a hint to set CORRAL_ADDR", r.code, r.stderr)
		}
	})
}

func TestParseJobIDs(t *testing.T) {
	good := map[string]struct {
		args []string
		want []uint64
	}{
		"one":                 {[]string{"12"}, []uint64{12}},
		"array element":       {[]string{"12_3"}, []uint64{12}},
		"comma list":          {[]string{"1,2"}, []uint64{1, 2}},
		"several arguments":   {[]string{"1,2", "3", "40_1"}, []uint64{1, 2, 3, 40}},
		"empty items skipped": {[]string{"1,,2,"}, []uint64{1, 2}},
		"nothing":             {nil, nil},
	}
	for name, tc := range good {
		t.Run(name, func(t *testing.T) {
			got, err := parseJobIDs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(got, tc.want) {
				t.Fatalf("parseJobIDs(%q) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
	bad := map[string]string{
		"word": "abc", "zero": "0", "negative": "-1", "fraction": "1.5", "no job before _": "_3",
		"bad item in a list": "1,x,3", "hex": "0x10", "too large": "99999999999999999999999",
	}
	for name, arg := range bad {
		t.Run("bad "+name, func(t *testing.T) {
			got, err := parseJobIDs([]string{arg})
			if err == nil {
				t.Fatalf("parseJobIDs(%q) = %v, want an error", arg, got)
			}
			if !strings.Contains(err.Error(), "is not a job id") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
		})
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseStates(t *testing.T) {
	good := map[string]struct {
		in   []string
		want []api.JobState
	}{
		"full names":        {[]string{"PENDING", "RUNNING"}, []api.JobState{api.StatePending, api.StateRunning}},
		"short codes":       {[]string{"PD", "R", "CD", "CA", "F", "TO", "NF", "OOM"}, []api.JobState{api.StatePending, api.StateRunning, api.StateCompleted, api.StateCancelled, api.StateFailed, api.StateTimeout, api.StateNodeFail, api.StateOutOfMemory}},
		"any case":          {[]string{"pd", "Running", "cg"}, []api.JobState{api.StatePending, api.StateRunning, api.StateCompleting}},
		"American spelling": {[]string{"canceled"}, []api.JobState{api.StateCancelled}},
		"all":               {[]string{"all"}, api.AllJobStates},
		"ALL among others":  {[]string{"PD", "ALL"}, api.AllJobStates},
		"none":              {nil, nil},
	}
	for name, tc := range good {
		t.Run(name, func(t *testing.T) {
			got, err := parseStates(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseStates(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("parseStates(%q) = %v, want %v", tc.in, got, tc.want)
				}
			}
		})
	}
	t.Run("all is a copy", func(t *testing.T) {
		got, _ := parseStates([]string{"all"})
		got[0] = "MANGLED"
		if api.AllJobStates[0] != api.StatePending {
			t.Fatal("parseStates handed out api.AllJobStates itself")
		}
	})
	for _, bad := range []string{"XX", "", "PENDINGX", "done"} {
		t.Run("bad "+bad, func(t *testing.T) {
			if got, err := parseStates([]string{"R", bad}); err == nil || !strings.Contains(err.Error(), "unknown job state") {
				t.Fatalf("parseStates(%q) = %v, %v; want an unknown job state error", bad, got, err)
			}
		})
	}
}

func TestInstallAliases(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self, _ = filepath.EvalSymlinks(self)
	dir := filepath.Join(t.TempDir(), "bin")
	ctx := context.Background()
	r := runCLI(t, ctx, "", "corral", "install-aliases", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, name := range []string{"sbatch", "squeue", "sinfo", "scancel", "scontrol"} {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != self {
			t.Errorf("%s -> %q (%v), want a link to %s", name, target, err, self)
		}
		if !strings.Contains(r.stdout, filepath.Join(dir, name)+" -> "+self) {
			t.Errorf("output does not report %s:\n%s", name, r.stdout)
		}
	}
	again := runCLI(t, ctx, "", "corral", "install-aliases", dir)
	if again.code != 1 || !strings.Contains(again.stderr, "--force") {
		t.Errorf("second install: exit %d, stderr %q; want 1 and a hint to use --force", again.code, again.stderr)
	}
	if forced := runCLI(t, ctx, "", "corral", "install-aliases", "--force", dir); forced.code != 0 {
		t.Errorf("install --force: exit %d, stderr %q", forced.code, forced.stderr)
	}

	// A refusal creates nothing: one file in the way leaves no half-installed set.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "squeue"), []byte("mine"), 0o755); err != nil {
		t.Fatal(err)
	}
	refused := runCLI(t, ctx, "", "corral", "install-aliases", other)
	if refused.code != 1 || !strings.Contains(refused.stderr, filepath.Join(other, "squeue")+" exists") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the squeue in the way", refused.code, refused.stderr)
	}
	entries, _ := os.ReadDir(other)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("a refused install left %v, want only the squeue that was there", names)
	}
	if data, _ := os.ReadFile(filepath.Join(other, "squeue")); string(data) != "mine" {
		t.Fatalf("a refused install changed the existing file to %q", data)
	}
}

func TestAliasTarget(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "corral")
	client := filepath.Join(dir, clientBinaryName)
	if err := os.WriteFile(full, []byte("full"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := aliasTarget(full); got != full {
		t.Errorf("without a client binary beside it: %s, want %s", got, full)
	}
	if err := os.WriteFile(client, []byte("client"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := aliasTarget(full); got != full {
		t.Errorf("with a client binary that is not executable: %s, want %s", got, full)
	}
	if err := os.Chmod(client, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := aliasTarget(full); got != client {
		t.Errorf("with the client binary beside it: %s, want %s", got, client)
	}
	if got := aliasTarget(client); got != client {
		t.Errorf("run as the client binary: %s, want itself", got)
	}
}
