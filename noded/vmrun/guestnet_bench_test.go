package vmrun

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"corral/noded"
)

// BenchmarkGuestNetwork measures raw TCP between a guest and the node, 256
// MiB each way, over the two transports the NFS share could use: the tap
// device in the VM's network namespace (what the share uses) and QEMU's
// user networking with restrict=on and guestfwd (slirp), on a second card
// of the same VM. The guest runs bash's /dev/tcp with dd.
func BenchmarkGuestNetwork(b *testing.B) {
	r := testRunner(b)
	script := `#!/bin/bash
ip link set eth1 up && ip addr add 10.0.3.15/24 dev eth1 || exit 1
measure() { # NAME ADDR UPPORT DOWNPORT
	t0=$(date +%s.%N); dd if=/dev/zero bs=1M count=256 status=none > /dev/tcp/$2/$3; t1=$(date +%s.%N)
	dd of=/dev/null bs=1M count=256 iflag=fullblock status=none < /dev/tcp/$2/$4; t2=$(date +%s.%N)
	echo "$1 up $(echo "256 / ($t1 - $t0)" | bc -l | cut -c1-6) down $(echo "256 / ($t2 - $t1)" | bc -l | cut -c1-6)"
}
measure tap 10.0.2.2 5001 5002
measure slirp 10.0.3.100 5001 5002
`
	for i := 0; i < b.N; i++ {
		spec := jobSpec(b, script, 1, 512)
		v := startWithSlirp(b, r, spec)
		res := waitResult(b, v, 5*time.Minute)
		out := readFile(b, spec.Stdout)
		if res.ExitCode != 0 {
			b.Fatalf("result %+v: %s", res, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			b.Logf("MiB/s %s (%s)", line, r.Accel())
		}
	}
}

// startWithSlirp starts the job's VM (the NFS default) with a second card
// on restricted slirp whose guestfwd sends 10.0.3.100:5001 to a sink and
// serves 256 MiB on :5002, and the same two services on the tap side.
func startWithSlirp(b *testing.B, r *Runner, spec noded.LaunchSpec) *VM {
	b.Helper()
	img, _ := r.image("")
	f := filesIn(spec.Dir)
	gfs := r.guestFS(spec)
	n, err := r.prepareNFS(spec.Dir, spec, gfs, startOpts{})
	if err != nil {
		b.Fatal(err)
	}
	for port, serve := range map[string]func(net.Conn){
		":5001": func(c net.Conn) { io.Copy(io.Discard, c) },
		":5002": func(c net.Conn) {
			buf := make([]byte, 1<<20)
			for i := 0; i < 256; i++ {
				c.Write(buf)
			}
		},
	} {
		l, err := n.net.ns.Listen("10.0.2.2" + port)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { serve(c); c.Close() }()
			}
		}()
	}
	as, err := r.qemuIdentityFor(f.dir, r.Accel())
	if err != nil {
		b.Fatal(err)
	}
	if err := writeInitrd(img, f.initrd, spec, gfs, nil, as); err != nil {
		b.Fatal(err)
	}
	var q qemuFiles
	defer q.close()
	out, _ := prepareOutputs(&q, spec.Stdout, "", false)
	a := vmArgs{img: img, accel: r.Accel(), cpus: 1, memMB: 512, f: f, out: out, node: "node1", net: n.net}
	q.set(fdTap, n.net.tap)
	if err := openQEMUFiles(&q, a); err != nil {
		b.Fatal(err)
	}
	argv := r.argv(a)
	slirp := []string{"-netdev", "user,id=sl,restrict=on,net=10.0.3.0/24,host=10.0.3.2," +
		"guestfwd=tcp:10.0.3.100:5001-cmd:dd of=/dev/null bs=1M status=none," +
		"guestfwd=tcp:10.0.3.100:5002-cmd:dd if=/dev/zero bs=1M count=256 status=none",
		"-device", "virtio-net-device,netdev=sl,mac=52:54:00:c0:44:03"}
	argv = append(argv[:len(argv)-2], append(slirp, argv[len(argv)-2:]...)...)
	v, err := r.launch(argv, &q, f, img.Name, r.Accel(), "", nil, false, as)
	n.net.closeTap()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { v.Kill(0); <-v.done })
	if err := v.startNFS(n, nil); err != nil {
		b.Fatal(err)
	}
	return v
}
