package vmrun

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"corral/noded"
	"corral/vmimage"

	"golang.org/x/sys/unix"
)

// These tests need neither QEMU nor an image.

func TestArgvFollowsTheHostContract(t *testing.T) {
	r := &Runner{cfg: Config{QEMU: "/usr/bin/qemu-system-x86_64"}, tscKHz: 2600000}
	img := &vmimage.Image{Name: "default", Kernel: "/img/vmlinux", Initrd: "/img/initramfs.cpio"}
	f := filesIn("/state/job,1")
	cases := map[string]struct {
		accel    string
		out      outputs
		node     string
		want     []string // consecutive argv pairs that must be present
		wantNot  []string // substrings no argument may hold
		wantTail string   // the -append value
		net      *guestNet
	}{
		"tcg, separate stderr": {
			accel: "tcg", out: outputs{stdout: "/o/out", stderr: "/o/err"}, node: "node1",
			want: []string{"-accel tcg,tb-size=" + strconv.Itoa(tcgBufferMB), "-cpu max", "-m 300", "-smp 2",
				"-add-fd fd=6,set=6", "-chardev file,id=con,path=/dev/fdset/6,append=on",
				"-add-fd fd=7,set=7", "-chardev file,id=out,path=/dev/fdset/7,append=on", "-device isa-serial,chardev=out,iobase=0x2f8,irq=3",
				"-add-fd fd=8,set=8", "-chardev file,id=err,path=/dev/fdset/8,append=on", "-device isa-serial,chardev=err,iobase=0x3e8,irq=5",
				"-add-fd fd=9,set=9", "-chardev file,id=ctl,path=/dev/fdset/9,append=on",
				"-chardev socket,id=qmp,fd=10,server=on,wait=off", "-mon chardev=qmp,mode=control",
				"-kernel /proc/self/fd/4", "-initrd /proc/self/fd/5",
				"-name guest=corral:/state/job,,1,debug-threads=on"},
			// QEMU opens no path of the node's: it inherits every file.
			wantNot:  []string{"/state/job,1/", "/state/job,,1/", "/o/out", "/o/err", "/img/"},
			wantTail: vmimage.KernelCmdline(2600000, vmimage.TCGCmdline, "corral.hostname=node1"),
		},
		"kvm, shared file, bad hostname": {
			accel: "kvm", out: outputs{stdout: "/o/both", shared: true}, node: "bad name",
			want:     []string{"-accel kvm", "-cpu host", "-chardev file,id=out,path=/dev/fdset/7,append=on"},
			wantNot:  []string{"id=err", "chardev=err", "corral.hostname", vmimage.TCGCmdline},
			wantTail: vmimage.KernelCmdline(2600000),
		},
		"discarded stdout": {
			accel: "tcg", out: outputs{stderr: "/o/err"},
			want: []string{"-chardev null,id=out", "-chardev file,id=err,path=/dev/fdset/8,append=on"},
		},
		"the NFS share's card": {
			accel: "tcg", out: outputs{stdout: "/o/out", shared: true}, net: &guestNet{},
			want: []string{"-netdev tap,id=share,fd=3,vhost=off", "-device virtio-net-device,netdev=share,mac=" + guestMAC,
				"-global virtio-mmio.force-legacy=false"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			argv := r.argv(vmArgs{img: img, accel: tc.accel, cpus: 2, memMB: 300, f: f, out: tc.out, node: tc.node, net: tc.net})
			pairs := map[string]bool{}
			for i := 0; i+1 < len(argv); i++ {
				pairs[argv[i]+" "+argv[i+1]] = true
			}
			for _, w := range append(tc.want, "-M microvm", "-serial chardev:con", "-display none") {
				if !pairs[w] {
					t.Errorf("argv lacks %q:\n%s", w, strings.Join(argv, " "))
				}
			}
			for _, a := range argv {
				for _, no := range tc.wantNot {
					if strings.Contains(a, no) {
						t.Errorf("argument %q holds %q", a, no)
					}
				}
			}
			if tc.wantTail != "" && argv[len(argv)-1] != tc.wantTail {
				t.Errorf("-append %q, want %q", argv[len(argv)-1], tc.wantTail)
			}
			for _, bad := range []string{"9p", "virtfs", "vfio", "-netdev user", "vhost=on"} {
				if strings.Contains(strings.Join(argv, " "), bad) {
					t.Errorf("argv holds %q, which would block live migration", bad)
				}
			}
		})
	}
}

func TestPrepareOutputsTruncatesAndPairsStreams(t *testing.T) {
	dir := t.TempDir()
	out, errp := filepath.Join(dir, "out"), filepath.Join(dir, "err")
	os.WriteFile(out, []byte("old run\n"), 0o644)
	cases := map[string]struct {
		stdout, stderr string
		want           outputs
	}{
		"separate":         {out, errp, outputs{stdout: out, stderr: errp}},
		"stderr unset":     {out, "", outputs{stdout: out, shared: true}},
		"same path":        {out, dir + "/./out", outputs{stdout: out, shared: true}},
		"both discarded":   {"", "", outputs{shared: true}},
		"stderr discarded": {out, os.DevNull, outputs{stdout: out}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var q qemuFiles
			defer q.close()
			got, err := prepareOutputs(&q, tc.stdout, tc.stderr, false)
			if err != nil || got != tc.want {
				t.Errorf("prepareOutputs = %+v, %v; want %+v", got, err, tc.want)
			}
			// QEMU inherits each file it writes, open for appending.
			for _, x := range []struct {
				path string
				fd   int
			}{{got.stdout, fdStdout}, {got.stderr, fdStderr}} {
				fh := q[x.fd-3]
				if (x.path == "") != (fh == nil) {
					t.Fatalf("%s: descriptor %d is %v", x.path, x.fd, fh)
				}
				if fh == nil {
					continue
				}
				fl, err := unix.FcntlInt(fh.Fd(), unix.F_GETFL, 0)
				if err != nil || fl&unix.O_APPEND == 0 || fl&unix.O_ACCMODE != unix.O_WRONLY {
					t.Errorf("%s: descriptor flags %#x, %v; want write-only, appending", x.path, fl, err)
				}
			}
		})
	}
	if b, _ := os.ReadFile(out); len(b) != 0 {
		t.Errorf("stdout not truncated: %q", b)
	}
}

func TestFinalResultReadsTheControlChannel(t *testing.T) {
	cases := map[string]struct {
		control, killed string
		want            noded.Result
		ok              bool
	}{
		"exit 3":           {"CORRAL STARTED\nCORRAL EXIT 3\n", "", noded.Result{ExitCode: 3}, true},
		"signal":           {"CORRAL STARTED\nCORRAL EXIT 143\n", "", noded.Result{Signal: 15}, true},
		"exit 200 is exit": {"CORRAL EXIT 200\n", "", noded.Result{ExitCode: 200}, true},
		"oom":              {"CORRAL STARTED\nCORRAL OOM\nCORRAL EXIT 137\n", "", noded.Result{Signal: 9, OOM: true}, true},
		"init error":       {"CORRAL ERROR no job payload\nCORRAL EXIT 127\n", "", noded.Result{ExitCode: 127, Message: "the guest could not start the job: no job payload"}, true},
		"killed":           {"CORRAL STARTED\n", "1\n", noded.Result{Signal: 9}, true},
		"exit beats kill":  {"CORRAL EXIT 0\n", "1\n", noded.Result{}, true},
		"crashed":          {"CORRAL STARTED\n", "", noded.Result{}, false},
		"emptied kill":     {"", "", noded.Result{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := filesIn(t.TempDir())
			os.WriteFile(f.control, []byte(tc.control), 0o600)
			os.WriteFile(f.killed, []byte(tc.killed), 0o600)
			got, ok := finalResult(f)
			if got != tc.want || ok != tc.ok {
				t.Errorf("finalResult = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestGuestRSSFindsTheRAMMapping(t *testing.T) {
	smaps := `55d24a92f000-55d24ad36000 r--p 00000000 fe:00 10166287                   /usr/bin/qemu-system-x86_64
Size:               4124 kB
Rss:                4124 kB
7fb4bba00000-7fb4bbc00000 rw-p 00000000 00:00 0 
Size:               2048 kB
Rss:                2048 kB
7fb4bbe00000-7fb4cbe00000 rw-p 00000000 00:00 0 
Size:             262144 kB
KernelPageSize:        4 kB
Rss:               59392 kB
VmFlags: rd wr mr mw me ac sd
7fb4d0c00000-7fb4d3ec7000 rw-p 00000000 fe:00 5309106                    /img/vmlinux
Size:              51996 kB
Rss:               45376 kB
`
	if kb, ok := guestRSS([]byte(smaps), 256*1024); !ok || kb != 59392 {
		t.Errorf("guestRSS = %d, %v; want 59392", kb, ok)
	}
	if _, ok := guestRSS([]byte(smaps), 512*1024); ok {
		t.Error("guestRSS found a mapping of the wrong size")
	}
	m := memUsage{}.merge(memUsage{hwm: 100, nonGuest: 90})
	m = m.merge(memUsage{hwm: 200, nonGuest: 60 << 10, guest: 80 << 10, foundGuest: true})
	m = m.merge(memUsage{hwm: 150, nonGuest: 150 << 10}) // teardown: no guest mapping
	if m.hwm != 200 || m.overheadMB() != 60 {
		t.Errorf("merged %+v: overhead %d MiB, want 60 and hwm 200", m, m.overheadMB())
	}
}

func TestCPUInfoMHz(t *testing.T) {
	info := "processor\t: 0\ncpu MHz\t\t: 2596.144\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n\nprocessor\t: 1\ncpu MHz\t\t: 800.000\n"
	mhz, constant := cpuinfoMHz([]byte(info))
	if mhz != 2596.144 || !constant {
		t.Errorf("cpuinfoMHz = %v, %v", mhz, constant)
	}
	if khz, src := hostTSCkHz(); khz < 0 || src == "" {
		t.Errorf("hostTSCkHz = %d, %q", khz, src)
	}
}
