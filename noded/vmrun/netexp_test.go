package vmrun

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/vmimage"
)

// TestNetExperiment (CORRAL_NETEXP=ganesha) boots a VM whose root and work
// directory are served by nfs-ganesha in the VM's network namespace, and
// measures raw TCP over the tap device and NFS throughput. Temporary.
func TestNetExperiment(t *testing.T) {
	server := os.Getenv("CORRAL_NETEXP")
	if server == "" {
		t.Skip("CORRAL_NETEXP unset")
	}
	r := testRunner(t)
	script := `#!/bin/bash
cd "$1"
t0=$(date +%s.%N); dd if=/dev/zero bs=1M count=256 status=none > /dev/tcp/10.0.2.2/5001; t1=$(date +%s.%N)
echo "tcp-up $(echo "256 / ($t1 - $t0)" | bc -l)"
t0=$(date +%s.%N); dd of=/dev/null bs=1M count=256 iflag=fullblock status=none < /dev/tcp/10.0.2.2/5002; t1=$(date +%s.%N)
echo "tcp-down $(echo "256 / ($t1 - $t0)" | bc -l)"
t0=$(date +%s.%N); dd if=/dev/zero of=big bs=1M count=256 conv=fsync status=none; t1=$(date +%s.%N)
echo 3 > /proc/sys/vm/drop_caches
t2=$(date +%s.%N); dd if=big of=/dev/null bs=1M status=none; t3=$(date +%s.%N)
mkdir many; t4=$(date +%s.%N); for i in $(seq 1000); do : > many/f$i; done; sync; t5=$(date +%s.%N)
echo "write $(echo "256 / ($t1 - $t0)" | bc -l)"
echo "read $(echo "256 / ($t3 - $t2)" | bc -l)"
echo "creates $(echo "1000 / ($t5 - $t4)" | bc -l)"
ls -ln many | head -3
`
	spec := jobSpec(t, script, 1, 512)
	spec.Args = []string{spec.Dir}
	img, _ := r.image("")
	dir := spec.Dir
	f := filesIn(dir)
	gn, err := newGuestNet(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer gn.remove()
	up, err := gn.ns.Listen("10.0.2.2:5001")
	if err != nil {
		t.Fatal(err)
	}
	down, _ := gn.ns.Listen("10.0.2.2:5002")
	go func() {
		c, err := up.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	go func() {
		c, err := down.Accept()
		if err == nil {
			buf := make([]byte, 1<<20)
			for i := 0; i < 256; i++ {
				c.Write(buf)
			}
			c.Close()
		}
	}()
	conf := filepath.Join(dir, "ganesha.conf")
	os.WriteFile(conf, []byte(`NFS_CORE_PARAM { Protocols = 3; NFS_Port = 2050; MNT_Port = 20048; Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false; }
NFSV4 { Graceless = true; }
EXPORT_DEFAULTS { Transports = TCP; Protocols = 3; SecType = sys; }
EXPORT { Export_Id = 1; Path = /tmp/gexp/root; Pseudo = /; Access_Type = RO; Squash = None; FSAL { Name = VFS; } }
EXPORT { Export_Id = 2; Path = `+dir+`; Pseudo = `+dir+`; Access_Type = RW; Squash = None; FSAL { Name = VFS; } }
`), 0o644)
	t0 := time.Now()
	rpcb := exec.Command("nsenter", "--net="+gn.ns.Path, "rpcbind", "-f", "-w")
	rpcb.Stderr = os.Stderr
	if err := rpcb.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { rpcb.Process.Kill(); rpcb.Wait() }()
	time.Sleep(300 * time.Millisecond)
	g := exec.Command("nsenter", "--net="+gn.ns.Path, "ganesha.nfsd", "-F", "-f", conf, "-L", filepath.Join(dir, "ganesha.log"), "-p", filepath.Join(dir, "ganesha.pid"))
	g.Stdout, g.Stderr = os.Stderr, os.Stderr
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { g.Process.Kill(); g.Wait() }()
	for {
		var c net.Conn
		gn.ns.Do(func() (err error) { c, err = net.Dial("tcp", "10.0.2.2:2050"); return })
		if c != nil {
			c.Close()
			break
		}
		if time.Since(t0) > 20*time.Second {
			t.Fatalf("ganesha did not listen: %s", readFile(t, filepath.Join(dir, "ganesha.log")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("ganesha listens after %v", time.Since(t0))
	gfs := &vmimage.FS{Kind: vmimage.ShareNFS, Addr: "10.0.2.2", Port: 2050, Export: "/tmp/gexp/root", GuestAddr: guestAddr.String(), MTU: netMTU, Shares: spec.Shares}
	if os.Getenv("CORRAL_NETEXP_MTU") != "" {
		gfs.MTU = 0
	}
	if err := writeInitrd(img, f.initrd, spec, gfs); err != nil {
		t.Fatal(err)
	}
	out, _ := prepareOutputs(spec.Stdout, "")
	a := vmArgs{img: img, accel: r.accel, cpus: 1, memMB: 512, f: f, out: out, node: "node1", net: gn}
	argv := r.argv(a)
	argv[len(argv)-1] += " corral.debug=1"
	v, err := r.launch(argv, gn.qemuFiles(), f, img.Name, r.accel, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	gn.closeTap()
	if err := v.awaitMonitor(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); <-v.done })
	res := waitResult(t, v, 5*time.Minute)
	o := readFile(t, spec.Stdout)
	t.Logf("result %+v\n%s\nconsole: %s", res, o, tailFile(f.console, 30, 4000))
	for _, line := range strings.Split(o, "\n") {
		t.Log(line)
	}
}
