package vmrun

import (
	"strings"
	"testing"
	"time"

	"corral/vmimage"
)

// BenchmarkShareThroughput measures, in a VM whose root is the host's,
// sequential write and read of 256 MiB and the rate of creating 1,000
// files in the job's shared working directory, through each share: nfs
// (the default) and virtiofs. The guest drops its page cache before
// reading, so the read crosses the share; the write ends with an fsync.
func BenchmarkShareThroughput(b *testing.B) {
	r := testRunner(b)
	script := `#!/bin/bash
cd "$1"
t0=$(date +%s.%N); dd if=/dev/zero of=big bs=1M count=256 conv=fsync status=none; t1=$(date +%s.%N)
echo 3 > /proc/sys/vm/drop_caches
t2=$(date +%s.%N); dd if=big of=/dev/null bs=1M status=none; t3=$(date +%s.%N)
mkdir many; t4=$(date +%s.%N); for i in $(seq 1000); do : > many/f$i; done; sync; t5=$(date +%s.%N)
echo "write $(echo "256 / ($t1 - $t0)" | bc -l)"
echo "read $(echo "256 / ($t3 - $t2)" | bc -l)"
echo "creates $(echo "1000 / ($t5 - $t4)" | bc -l)"
`
	for i := 0; i < b.N; i++ {
		for _, share := range []string{vmimage.ShareNFS, vmimage.ShareVirtiofs} {
			spec := jobSpec(b, script, 1, 512)
			spec.Args = []string{spec.Dir}
			spec.Share = share
			v := start(b, r, spec)
			res := waitResult(b, v, 5*time.Minute)
			out := readFile(b, spec.Stdout)
			if res.ExitCode != 0 {
				b.Fatalf("%s: result %+v: %s", share, res, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				b.Logf("%s %s (%s)", share, line, r.Accel())
			}
		}
	}
}
