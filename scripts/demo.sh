#!/usr/bin/env bash
# The demo behind `make demo`: starts the embedded cluster (one controller,
# two node daemons), submits sample jobs, shows them, waits for them, prints
# their outputs and stops the cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
corral="$root/bin/corral"
work=$(mktemp -d /tmp/corral-demo.XXXXXX)
# listening HOST:PORT: whether something accepts connections there.
listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
# free_port START: the first port from START up that nothing listens on.
free_port() {
	local p=$1
	while listening "127.0.0.1:$p"; do p=$((p + 1)); done
	echo "$p"
}
# The demo runs its own cluster: a corral (or anything) already on the
# default ports must not receive its jobs, so busy ports are skipped.
if [ -n "${CORRAL_DEMO_HTTP:-}" ]; then
	http=$CORRAL_DEMO_HTTP
	if listening "$http"; then
		echo "demo: something already listens on $http (CORRAL_DEMO_HTTP); stop it or choose another address" >&2
		exit 1
	fi
else
	http=127.0.0.1:$(free_port 6817)
fi
raft=${CORRAL_DEMO_RAFT:-127.0.0.1:$(free_port $((${http##*:} + 3)))}
[ "$http" = 127.0.0.1:6817 ] || echo "demo: port 6817 is taken; the demo cluster listens on $http"
# The demo cluster runs as a real one would: over TLS with an authority of
# its own, every request authenticated (you are who the host's agent says).
export CORRAL_ADDR="https://$http" CORRAL_CA="$work/state/pki/ca.crt" CORRAL_AUTHD="$work/state/authd.sock"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting the embedded cluster (corral dev) — log in $work/dev.log"
"$corral" dev --secure --data "$work/state" --http "$http" --raft "$raft" --cpus 2 --mem 2G >"$work/dev.log" 2>&1 &
dev=$!
stop() {
  if kill -0 "$dev" 2>/dev/null; then
    kill -INT "$dev"; wait "$dev" || true
  fi
}
trap stop EXIT
for _ in $(seq 200); do
  [ "$("$corral" nodes -N -h 2>/dev/null | grep -vc down)" = 2 ] && break
  kill -0 "$dev" 2>/dev/null || { cat "$work/dev.log"; exit 1; }
  sleep 0.1
done
# The cluster that answers must be the one just started (its state
# directory is this demo's), not one that took the port meanwhile.
kill -0 "$dev" 2>/dev/null || { echo "demo: the embedded cluster exited:" >&2; cat "$work/dev.log" >&2; exit 1; }
"$corral" status
"$corral" whoami

mkdir -p "$work/jobs" && cd "$work/jobs"
cat > hello.sh <<'JOB'
#!/bin/sh
#SBATCH --job-name=hello
#SBATCH --time=1:00
#SBATCH --cpus-per-task=2
#SBATCH --output=hello-%j.out
echo "hello from job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURMD_NODENAME with $SLURM_CPUS_ON_NODE CPUs"
echo "inside the VM: $(nproc) vCPUs, kernel $(uname -r)"
sleep 1
echo "submitted from $SLURM_SUBMIT_DIR"
JOB
cat > fails.sh <<'JOB'
#!/bin/sh
#SBATCH -J fails -o fails-%j.out
echo "about to fail"
exit 3
JOB

say "the Slurm commands: symlinks to corral-client, the lean client binary (corral install-aliases)"
"$corral" install-aliases "$work/bin"
export PATH="$work/bin:$PATH"
[ "$(readlink -f "$(command -v sbatch)")" = "$(readlink -f "$root/bin/corral-client")" ] ||
	{ echo "demo: sbatch does not resolve to bin/corral-client" >&2; exit 1; }

say "sbatch: a script with #SBATCH lines, a --wrap, and a job that fails"
sbatch hello.sh
sbatch -J wrapped -o wrapped-%j.out --wrap 'echo "wrapped command ran as job $CORRAL_JOB_ID"; sleep 1'
sbatch fails.sh

say "squeue"
squeue
say "sinfo (each job runs in its own QEMU VM: the node's images and accelerator)"
sinfo
"$corral" show node n1 | grep -E "NodeName|Runner|Images|Accel"

say "waiting for the jobs"
for _ in $(seq 300); do
  [ -z "$("$corral" queue -h)" ] && break
  sleep 0.1
done
"$corral" queue -t all -o "%.6i %.10j %.10T %.8M %N"
say "exit codes (scontrol show job)"
for id in $("$corral" queue -t all -h -o "%i"); do
  scontrol show job "$id" | grep -E "JobId=|ExitCode=" | tr -s ' \n' ' '; echo
done

say "job outputs"
for f in *.out; do echo "--- $f"; cat "$f"; done

say "stopping the cluster"
stop
trap - EXIT
cat "$work/dev.log" | tail -3
rm -rf "$work"
