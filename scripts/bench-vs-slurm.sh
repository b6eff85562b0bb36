#!/usr/bin/env bash
# Measures corral's Slurm commands side by side with Slurm 22.05's on this
# machine, in one run: a command's start and exit, sinfo, scontrol show
# job, one sbatch loop and four sbatch loops at once. Both clusters run
# here with 16 job slots: Slurm's slurmctld, one slurmd and munged with a
# private configuration; corral's three controller voters and one node
# daemon (process runner). Each measurement alternates the two systems,
# and prints the machine's load beside it: on a shared machine, compare the
# two columns of one run, not runs with each other.
#
#   scripts/bench-vs-slurm.sh [--install] [--jobs N] [--rounds R] [--calls C]
#
#   --install   install Debian's Slurm and munge first (slurmctld, slurmd,
#               slurm-client, munge) with apt-get; otherwise they must be
#               installed
#   --jobs N    jobs per sbatch loop (default 1000)
#   --rounds R  rounds of every measurement, alternating which system goes
#               first (default 2)
#   --calls C   calls per round of the short commands (default 200)
#   --no-build  use bin/corral and bin/corral-client as they are
#
# Needs root (Slurm's daemons run as root with the private configuration).
# Not part of make test: it takes minutes and installs nothing unless asked.
# docs/performance.md ("As fast as Slurm's own commands") records its
# figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=1000 rounds=2 calls=200 install="" build=1
while [ $# -gt 0 ]; do
	case $1 in
	--install) install=1 ;;
	--jobs) jobs=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--calls) calls=$2; shift ;;
	--no-build) build="" ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;/^set -e/d'; exit 0 ;;
	*) echo "bench-vs-slurm: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "bench-vs-slurm: run as root (Slurm's daemons run as root here)" >&2; exit 1; }
if [ -n "$install" ]; then
	# shellcheck source=scripts/apt-wait.sh
	. "$root/scripts/apt-wait.sh"
	apt_get update -q
	apt_get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge
fi
for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch /usr/bin/time; do
	[ -x "$p" ] || { echo "bench-vs-slurm: $p is missing: run with --install (or apt-get install slurmctld slurmd slurm-client munge time)" >&2; exit 1; }
done
if [ -n "$build" ]; then
	make -C "$root" build >/dev/null
fi
corral=$root/bin/corral
[ -x "$root/bin/corral-client" ] || { echo "bench-vs-slurm: $root/bin/corral-client is missing: run make build" >&2; exit 1; }

work=$(mktemp -d /tmp/bench-vs-slurm.XXXXXX)
pids=()
cleanup() {
	set +e
	SLURM_CONF=$work/slurm/slurm.conf /usr/bin/scancel -u root >/dev/null 2>&1
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
log() { printf '%s  %s\n' "$(date +%T)" "$*" >&2; }
load() { cut -d' ' -f1 /proc/loadavg; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
next_port=17000
# take_port VAR: sets VAR to a free port (not in a subshell: the next call
# must not hand out the same one).
take_port() {
	while listening "$next_port"; do next_port=$((next_port + 1)); done
	printf -v "$1" %s "$next_port"
	next_port=$((next_port + 1))
}
# alive NAME PID...: fails with NAME's logs unless every PID runs.
alive() {
	local name=$1 p
	shift
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && continue
		echo "bench-vs-slurm: $name exited:" >&2
		tail -n 5 "$work"/*/*.out "$work"/*/*.log >&2 2>/dev/null || true
		exit 1
	done
}

# --- Slurm: munged, slurmctld and one slurmd of 16 CPUs -------------------
sd=$work/slurm
mkdir -p "$sd/state" "$sd/spool"
head -c 1024 /dev/urandom >"$sd/munge.key"
chmod 400 "$sd/munge.key"
/usr/sbin/munged -F -f --socket="$sd/munge.sock" --key-file="$sd/munge.key" --pid-file="$sd/munged.pid" \
	--log-file="$sd/munged.log" --seed-file="$sd/munged.seed" >"$sd/munged.out" 2>&1 &
pids+=($!)
munged_pid=$!
take_port ctl_port
take_port d_port
host=$(hostname -s)
cat >"$sd/slurm.conf" <<EOF
ClusterName=bench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sd/munge.sock
CredType=cred/munge
StateSaveLocation=$sd/state
SlurmdSpoolDir=$sd/spool
SlurmctldPidFile=$sd/slurmctld.pid
SlurmdPidFile=$sd/slurmd.pid
SlurmctldLogFile=$sd/slurmctld.log
SlurmdLogFile=$sd/slurmd.log
SlurmctldDebug=error
SlurmdDebug=error
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
# The high-throughput guide's settings.
MaxJobCount=500000
MinJobAge=2
SchedulerParameters=defer,batch_sched_delay=3,sched_min_interval=2000000,max_rpc_cnt=150
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$sd/slurm.conf
for _ in $(seq 100); do [ -S "$sd/munge.sock" ] && break; sleep 0.1; done
/usr/sbin/slurmctld -D -i >"$sd/slurmctld.out" 2>&1 &
pids+=($!)
slurmctld_pid=$!
/usr/sbin/slurmd -D >"$sd/slurmd.out" 2>&1 &
pids+=($!)
slurmd_pid=$!

# --- corral: three voters and one node daemon of 16 CPUs ------------------
cd_=$work/corral
mkdir -p "$cd_"
peers="" https=()
for i in 1 2 3; do
	take_port r
	take_port h
	peers+="${peers:+,}c$i=127.0.0.1:$r"
	raft[$i]=127.0.0.1:$r
	https[$i]=127.0.0.1:$h
done
for i in 1 2 3; do
	"$corral" ctld --id "c$i" --data "$cd_/c$i" --raft "${raft[$i]}" --http "${https[$i]}" --peers "$peers" \
		--rate-writes off --rate-reads off --log-level warn >"$cd_/c$i.log" 2>&1 &
	pids+=($!)
	ctld_pid[$i]=$!
done
all_addrs="http://${https[1]},http://${https[2]},http://${https[3]}"
export CORRAL_ADDR=$all_addrs
leader=""
for _ in $(seq 200); do
	alive "corral's controller" "${ctld_pid[@]}"
	leader=$("$corral" status 2>/dev/null | sed -n 's/^Leader: *\(c[123]\)$/\1/p') || true
	[ -n "$leader" ] && break
	sleep 0.1
done
[ -n "$leader" ] || { echo "bench-vs-slurm: corral's controllers elected no leader:" >&2; tail "$cd_"/c*.log >&2; exit 1; }
n=${leader#c}
# The leader first: a follower forwards writes to it (one more hop).
export CORRAL_ADDR="http://${https[$n]},$all_addrs"
"$corral" noded --name n1 --data "$cd_/n1" --cpus 16 --mem 16G --runner process --run-jobs-as daemon --log-level warn \
	>"$cd_/n1.log" 2>&1 &
pids+=($!)
noded_pid=$!
aliases=$cd_/aliases
"$corral" install-aliases "$aliases" >/dev/null

for _ in $(seq 300); do
	alive Slurm "$munged_pid" "$slurmctld_pid" "$slurmd_pid"
	alive corral "${ctld_pid[@]}" "$noded_pid"
	s=$(/usr/bin/sinfo -h -o %t 2>/dev/null || true)
	c=$("$aliases/sinfo" -h -o %t 2>/dev/null || true)
	[ "$s" = idle ] && [ "$c" = idle ] && break
	sleep 0.2
done
[ "$s" = idle ] || { echo "bench-vs-slurm: Slurm's node is not idle ($s):" >&2; cat "$sd"/*.out "$sd"/*.log >&2; exit 1; }
[ "$c" = idle ] || { echo "bench-vs-slurm: corral's node is not idle ($c):" >&2; tail "$cd_"/*.log >&2; exit 1; }
log "Slurm $(/usr/bin/sbatch --version | cut -d' ' -f2) and corral $("$corral" version | cut -d' ' -f2) are up; aliases -> $(readlink "$aliases/sbatch")"

# --- measuring -------------------------------------------------------------
# Jobs write their output files where they are submitted: here, removed at
# the end.
mkdir -p "$work/jobs"
cd "$work/jobs"

# per_call N CMD...: runs CMD N times in a loop; prints the wall and CPU
# (user+sys, the loop's fork and exec included) milliseconds per call.
per_call() {
	local n=$1 t
	shift
	t=$({ /usr/bin/time -f '%e %U %S' bash -c 'n=$1; shift; for ((i = 0; i < n; i++)); do "$@" >/dev/null || exit 1; done' _ "$n" "$@"; } 2>&1 >/dev/null | tail -1)
	awk -v n="$n" '{ printf "%.2f %.2f\n", $1 * 1000 / n, ($2 + $3) * 1000 / n }' <<<"$t"
}

# instructions CMD...: user-space instructions of one run (valgrind), or -.
instructions() {
	command -v valgrind >/dev/null || { echo -; return; }
	valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
		sed -n 's/.*I *refs: *//p' | tr -d ,
}

# cpu_ticks PID...: user+system CPU of the processes, in clock ticks.
cpu_ticks() {
	local total=0 p f
	for p in "$@"; do
		read -ra f <"/proc/$p/stat"
		# Fields 14 and 15 (utime, stime) counted after the ")" of comm.
		total=$((total + f[13] + f[14]))
	done
	echo "$total"
}
hz=$(getconf CLK_TCK)

# drain SYSTEM: cancels every job and waits for an empty queue.
drain() {
	local sq
	if [ "$1" = slurm ]; then
		/usr/bin/scancel -u root
		sq=/usr/bin/squeue
	else
		"$aliases/scancel" -u root >/dev/null 2>&1 || true
		sq=$aliases/squeue
	fi
	for _ in $(seq 600); do
		[ -z "$("$sq" -h -t pending,running 2>/dev/null | head -1)" ] && return
		sleep 0.2
	done
	echo "bench-vs-slurm: $1's queue did not empty" >&2
	exit 1
}

bin_of() { if [ "$1" = slurm ]; then echo /usr/bin; else echo "$aliases"; fi; }
ctl_pids() { if [ "$1" = slurm ]; then echo "$slurmctld_pid $munged_pid"; else echo "${ctld_pid[*]}"; fi; }

# loops SYSTEM PARALLEL: PARALLEL sbatch loops of $jobs jobs each at once;
# prints jobs/s, client CPU ms per job, controller CPU ms per job.
loops() {
	local sys=$1 par=$2 b t c0 c1
	b=$(bin_of "$sys")
	# shellcheck disable=SC2046
	c0=$(cpu_ticks $(ctl_pids "$sys"))
	t=$({ /usr/bin/time -f '%e %U %S' bash -c '
		for ((l = 0; l < $1; l++)); do
			(for ((i = 0; i < $2; i++)); do "$3" -J bench --wrap "sleep 600" >/dev/null || exit 1; done) &
		done
		wait' _ "$par" "$jobs" "$b/sbatch"; } 2>&1 >/dev/null | tail -1)
	# shellcheck disable=SC2046
	c1=$(cpu_ticks $(ctl_pids "$sys"))
	awk -v n=$((par * jobs)) -v ctl=$((c1 - c0)) -v hz="$hz" \
		'{ printf "%.0f %.2f %.2f\n", n / $1, ($2 + $3) * 1000 / n, ctl * 1000 / hz / n }' <<<"$t"
}

results=$work/results
: >"$results"
record() { echo "$*" >>"$results"; }

# Short commands: one job of each system to show.
slurm_job=$(/usr/bin/sbatch --parsable -J show --wrap "sleep 600")
corral_job=$("$aliases/sbatch" --parsable -J show --wrap "sleep 600")
order() { if [ $(($1 % 2)) = 1 ]; then echo "slurm corral"; else echo "corral slurm"; fi; }
for round in $(seq "$rounds"); do
	for sys in $(order "$round"); do
		b=$(bin_of "$sys")
		job=$slurm_job
		[ "$sys" = corral ] && job=$corral_job
		l=$(load)
		record "start $sys $(per_call "$calls" "$b/sbatch" --version) $l"
		record "sinfo $sys $(per_call "$calls" "$b/sinfo") $l"
		record "show $sys $(per_call "$calls" "$b/scontrol" show job "$job") $l"
		log "round $round, $sys: short commands done (load $l)"
	done
done
for sys in slurm corral; do
	b=$(bin_of "$sys")
	job=$slurm_job
	[ "$sys" = corral ] && job=$corral_job
	record "instr $sys $(instructions "$b/sbatch" --version) $(instructions "$b/sinfo") $(instructions "$b/scontrol" show job "$job") $(instructions "$b/sbatch" -J instr --wrap true)"
done
# The full binary, for reference: what the aliases cost before the client binary.
record "fullstart corral $(per_call "$calls" "$corral" submit --version) $(load)"
drain slurm
drain corral

for round in $(seq "$rounds"); do
	for par in 1 4; do
		for sys in $(order "$round"); do
			l=$(load)
			r=$(loops "$sys" "$par")
			record "loop$par $sys $r $l"
			log "round $round, $par loop(s) of $jobs, $sys: $r (jobs/s, client ms/job, controller ms/job; load $l)"
			drain "$sys"
		done
	done
done

# --- report ----------------------------------------------------------------
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v k="$1" -v s="$2" -v c="$3" '$1 == k && $2 == s { print $c }' "$results" | median; }
loads() { grep -v "^instr" "$results" | awk '{ print $NF }' | sort -n | sed -n '1p;$p' | paste -sd- -; }
echo
echo "## corral against Slurm 22.05 on $(hostname) ($(nproc) CPUs), $(date -u +%Y-%m-%dT%H:%MZ), load $(loads)"
echo
echo "Medians of $rounds rounds; ms per call include the loop's fork and exec (the same for both)."
echo
printf '| what | Slurm | corral | corral ÷ Slurm | target |\n|---|---|---|---|---|\n'
for k in start sinfo show; do
	sw=$(col "$k" slurm 3) cw=$(col "$k" corral 3) sc=$(col "$k" slurm 4) cc=$(col "$k" corral 4)
	case $k in
	start) what="\`sbatch --version\` (start + exit)" target="≤ 2 ms" ;;
	sinfo) what="\`sinfo\`" target="≤ Slurm" ;;
	show) what="\`scontrol show job\`" target="≤ Slurm" ;;
	esac
	printf '| %s, wall / CPU ms | %s / %s | %s / %s | %.2f / %.2f | %s |\n' "$what" "$sw" "$sc" "$cw" "$cc" \
		"$(awk -v a="$cw" -v b="$sw" 'BEGIN { print a / b }')" "$(awk -v a="$cc" -v b="$sc" 'BEGIN { print a / b }')" "$target"
done
for par in 1 4; do
	sr=$(col "loop$par" slurm 3) cr=$(col "loop$par" corral 3)
	target="≥ 1.5× Slurm"
	[ "$par" = 4 ] && target="≥ 2× Slurm"
	printf '| %s sbatch loop(s) of %s jobs, jobs/s | %s | %s | %.2f | %s |\n' "$par" "$jobs" "$sr" "$cr" \
		"$(awk -v a="$cr" -v b="$sr" 'BEGIN { print a / b }')" "$target"
	printf '| … client CPU ms per job / controller CPU ms per job | %s / %s | %s / %s | | |\n' \
		"$(col "loop$par" slurm 4)" "$(col "loop$par" slurm 5)" "$(col "loop$par" corral 4)" "$(col "loop$par" corral 5)"
done
read -r _ _ s1 s2 s3 s4 <<<"$(grep '^instr slurm' "$results")"
read -r _ _ c1 c2 c3 c4 <<<"$(grep '^instr corral' "$results")"
printf '| user-space instructions (valgrind): sbatch --version / sinfo / scontrol show job / sbatch --wrap | %s / %s / %s / %s | %s / %s / %s / %s | | |\n' \
	"$s1" "$s2" "$s3" "$s4" "$c1" "$c2" "$c3" "$c4"
read -r _ _ fw fc _ <<<"$(grep '^fullstart' "$results")"
echo
echo "The full corral binary (\`corral submit --version\`): $fw ms wall, $fc ms CPU per call."
echo "Controller CPU: slurmctld + munged; corral's three voters together."
echo
echo "Raw figures (what system wall-ms cpu-ms load, or jobs/s client-ms controller-ms load):"
sed 's/^/    /' "$results"
