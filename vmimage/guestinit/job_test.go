package guestinit

import (
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"corral/vmimage"
)

func writeJob(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadJob(t *testing.T) {
	tests := map[string]struct {
		files map[string]string
		want  Job // Argv[0] "SCRIPT" stands for dir/script
	}{
		"shebang script with everything": {
			files: map[string]string{
				"script":  "#!/bin/sh\necho hi\n",
				"env":     "PATH=/bin\x00MULTI=a b\nc\x00EMPTY=\x00=noname\x00novalue\x00EQ=x=y\x00",
				"args":    "one two\x00\x00three\nfour\x00",
				"workdir": "/home/u/run\n",
			},
			want: Job{
				Argv:    []string{"SCRIPT", "one two", "", "three\nfour"},
				Env:     []string{"PATH=/bin", "MULTI=a b\nc", "EMPTY=", "EQ=x=y"},
				WorkDir: "/home/u/run",
			},
		},
		"plain script runs through sh, no args, root workdir": {
			files: map[string]string{"script": "echo hi\n", "workdir": "\n"},
			want:  Job{Argv: []string{"/bin/sh", "SCRIPT"}, ScriptArg: 1, WorkDir: "/"},
		},
		"the host's root as a user": {
			files: map[string]string{"script": "#!/bin/bash\n", "workdir": "/home/alice/run\n",
				"user": "alice\n1000\n1000\n27 1000\n/home/alice\n",
				"fs":   "root virtiofs corral-host\nshare /home/alice\nshare /scratch\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/home/alice/run",
				User: &vmimage.User{Name: "alice", UID: 1000, GID: 1000, Groups: []uint32{27, 1000}, Home: "/home/alice"},
				FS:   &vmimage.FS{Kind: "virtiofs", Tag: "corral-host", Shares: []string{"/home/alice", "/scratch"}}},
		},
		"the host's root over NFS with the card's MTU": {
			files: map[string]string{"script": "#!/bin/bash\n", "workdir": "/w\n",
				"fs": "root nfs 10.0.2.2 2049 / 10.0.2.15/24 65520\nshare /w\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/w",
				FS: &vmimage.FS{Kind: "nfs", Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24", MTU: 65520, Shares: []string{"/w"}}},
		},
		"the host's root over NFS with a way out through the node": {
			files: map[string]string{"script": "#!/bin/bash\n", "workdir": "/w\n",
				"fs": "root nfs 10.0.2.2 2049 / 10.0.2.15/24 65520\ngateway 10.0.2.2\nnameserver 192.0.2.53\nnameserver 198.51.100.53\nshare /w\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/w",
				FS: &vmimage.FS{Kind: "nfs", Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24", MTU: 65520,
					Gateway: "10.0.2.2", Nameservers: []string{"192.0.2.53", "198.51.100.53"}, Shares: []string{"/w"}}},
		},
		"the host's root over NFS": {
			files: map[string]string{"script": "#!/bin/bash\n", "workdir": "/w\n",
				"fs": "root nfs 10.0.2.2 2049 / 10.0.2.15/24\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/w",
				FS: &vmimage.FS{Kind: "nfs", Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24"}},
		},
		"an input file and limits": {
			files: map[string]string{"script": "#!/bin/sh\n", "input": "/w/in.txt\n", "rlimits": "CORE=0\nNOFILE=77\nSTACK=18446744073709551615\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/", Input: "/w/in.txt",
				Rlimits: []vmimage.Rlimit{{Name: "CORE"}, {Name: "NOFILE", Value: 77}, {Name: "STACK", Value: ^uint64(0)}}},
		},
		"a multi-node job's network": {
			files: map[string]string{"script": "#!/bin/sh\n",
				"net": "card 52:54:01:d6:00:02 10.214.0.2/16 1450\nhost 10.214.0.1 n1\nhost 10.214.0.2 n2\n"},
			want: Job{Argv: []string{"SCRIPT"}, WorkDir: "/",
				Net: &vmimage.Net{MAC: net.HardwareAddr{0x52, 0x54, 1, 0xd6, 0, 2}, Addr: netip.MustParsePrefix("10.214.0.2/16"), MTU: 1450,
					Hosts: []vmimage.Host{{Name: "n1", Addr: netip.MustParseAddr("10.214.0.1")}, {Name: "n2", Addr: netip.MustParseAddr("10.214.0.2")}}}},
		},
		"one empty argument": {
			files: map[string]string{"script": "#!/bin/sh\n", "args": "\x00"},
			want:  Job{Argv: []string{"SCRIPT", ""}, WorkDir: "/"},
		},
		"last entry without its NUL": {
			files: map[string]string{"script": "#!/bin/sh\n", "env": "A=1\x00B=2"},
			want:  Job{Argv: []string{"SCRIPT"}, Env: []string{"A=1", "B=2"}, WorkDir: "/"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeJob(t, tc.files)
			got, err := ReadJob(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range tc.want.Argv {
				if a == "SCRIPT" {
					tc.want.Argv[i] = filepath.Join(dir, "script")
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReadJob = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestReadJobRefusesABadNet(t *testing.T) {
	dir := writeJob(t, map[string]string{"script": "#!/bin/sh\n", "net": "card 52:54:01:d6:00:02 10.214.0.2/16 1450\nhost 10.215.0.1 n1\n"})
	if j, err := ReadJob(dir); err == nil {
		t.Errorf("ReadJob took a host off the job's network: %+v", j.Net)
	}
}

func TestReadJobWithoutScript(t *testing.T) {
	if _, err := ReadJob(writeJob(t, map[string]string{"env": "A=1\x00"})); !errors.Is(err, ErrNoPayload) {
		t.Errorf("ReadJob without a script = %v, want ErrNoPayload", err)
	}
}

func TestParseCmdline(t *testing.T) {
	got := ParseCmdline("console=ttyS0 quiet corral.hostname=node7 panic=-1 corral.debug=1\n")
	if want := (Options{Debug: true, Hostname: "node7"}); got != want {
		t.Errorf("ParseCmdline = %+v, want %+v", got, want)
	}
	if got := ParseCmdline("console=ttyS0 corral.warm=root corral.agent=1"); got != (Options{Warm: "root", Agent: true}) {
		t.Errorf("ParseCmdline of a snapshot's boot = %+v", got)
	}
	if got := ParseCmdline("corral.warm=hot"); got != (Options{}) {
		t.Errorf("ParseCmdline of an unknown stage = %+v", got)
	}
	if got := ParseCmdline("console=ttyS0 corral.debug=0"); got != (Options{}) {
		t.Errorf("ParseCmdline without corral options = %+v", got)
	}
}

func TestExitCodes(t *testing.T) {
	if got := ExitCode(true, 3, 0); got != 3 {
		t.Errorf("exit 3 -> %d", got)
	}
	if got := ExitCode(false, 0, 9); got != 137 {
		t.Errorf("SIGKILL -> %d, want 137", got)
	}
	if got := StartFailureCode(fs.ErrNotExist); got != 127 {
		t.Errorf("missing interpreter -> %d, want 127", got)
	}
	if got := StartFailureCode(fs.ErrPermission); got != 126 {
		t.Errorf("not executable -> %d, want 126", got)
	}
}

// TestRlimitsRoundTrip: the payload's rlimits file and the stub's argument
// read back as written; a line that is not NAME=VALUE is refused.
func TestRlimitsRoundTrip(t *testing.T) {
	ls := []vmimage.Rlimit{{Name: "CORE"}, {Name: "NOFILE", Value: 77}}
	got, err := ParseRlimits(strings.ReplaceAll(FormatRlimits(ls), ",", "\n"))
	if err != nil || !reflect.DeepEqual(got, ls) {
		t.Errorf("round trip = %v, %v", got, err)
	}
	if _, err := ParseRlimits("NOFILE=lots"); err == nil {
		t.Error("NOFILE=lots was taken")
	}
}
