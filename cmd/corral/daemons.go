//go:build !corral_client

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/ctld"
	"corral/ctld/sched"
	"corral/internal/authd"
	"corral/internal/getopt"
	"corral/internal/pki"
	"corral/noded"
	"corral/noded/hardware"
	"corral/noded/vmrun"
	"corral/submit"
)

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func parseDuration(name, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--%s=%s: not a duration (examples: 10s, 1m)", name, v)
	}
	return d, nil
}

// parsePartitions reads "batch*,debug:1:00:00": names, the default marked
// with *, an optional maximum time limit after a colon.
func parsePartitions(s string) ([]api.Partition, error) {
	var parts []api.Partition
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, limit, hasLimit := strings.Cut(item, ":")
		p := api.Partition{Name: strings.TrimSuffix(name, "*"), Default: strings.HasSuffix(name, "*")}
		if hasLimit {
			secs, err := submit.ParseTimeLimit(limit)
			if err != nil {
				return nil, fmt.Errorf("--partitions: %s: %w", p.Name, err)
			}
			p.MaxTime = secs
		}
		if p.Name == "" {
			return nil, fmt.Errorf("--partitions: empty partition name in %q", s)
		}
		if why := submit.NameProblem(p.Name, submit.MaxNameBytes); why != "" {
			return nil, fmt.Errorf("--partitions: partition name %q %s", p.Name, why)
		}
		for _, q := range parts {
			if q.Name == p.Name {
				return nil, fmt.Errorf("--partitions: partition %s is listed twice in %q", p.Name, s)
			}
			if q.Default && p.Default {
				return nil, fmt.Errorf("--partitions: both %s and %s are marked default (*) in %q; mark one", q.Name, p.Name, s)
			}
		}
		parts = append(parts, p)
	}
	return parts, nil
}

func runCtld(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "ctld", getopt.Permute, args, append([]getopt.Option{
		valued(0, "id", "ID", "this member's id, e.g. c1"),
		valued(0, "data", "DIR", "directory for the Raft log, stable store and snapshots"),
		valued(0, "raft", "HOST:PORT", "Raft listen address"),
		valued(0, "http", "HOST:PORT", "API listen address"),
		valued(0, "peers", "ID=HOST:PORT,...", "every voter's Raft address, this member included"),
		valued(0, "partitions", "LIST", "a new cluster's partitions, default first or marked *, e.g. batch*,debug:30:00 (default batch); later: corral partition"),
		valued(0, "partitions-file", "FILE", "a new cluster's partitions as a JSON list of objects (name, default, max_time_s, default_time_s, queue_unfit, shared_paths, share, network, and the other fields of corral partition) instead of --partitions; later: corral partition"),
		valued(0, "queue-unfit", "LIST", "a new cluster's partitions that keep a job no node could hold pending (until a larger node joins) instead of refusing it"),
		valued(0, "node-timeout", "DURATION", "missed-heartbeat window before a node is DOWN (default 10s)"),
		valued(0, "http-header-timeout", "DURATION", "time an API client may take to send a request's headers (default 10s)"),
		valued(0, "http-body-timeout", "DURATION", "time an API client may take to send a request's body (default 30s)"),
		valued(0, "def-mem-per-cpu", "SIZE", "a new cluster's memory per CPU for jobs that ask for none (default 512M; later: corral config set DefMemPerCPU=MiB)"),
		valued(0, "backfill", "MODE", "a new cluster's policy: easy (default), conservative, or none (first come, first served); later: corral config set SchedulerPolicy=..."),
		valued(0, "rate-writes", "N[/s]", "writes (POST, PUT) one principal may send a second, sustained (default 200; off: unlimited); a batch of jobs counts once"),
		valued(0, "rate-write-burst", "N", "writes one principal may send at once after a quiet spell (default 2000)"),
		valued(0, "rate-reads", "N[/s]", "listings (jobs, queue, priority, share, policy) one principal may ask for a second, sustained (default 20; off: unlimited)"),
		valued(0, "rate-read-burst", "N", "listings one principal may ask for at once (default 100)"),
		valued(0, "log-level", "LEVEL", "debug, info, warn or error (default info)"),
		flag(0, "auth", "authenticate every request (tokens, hosts' agents, certificates) and hold each caller to its role and tenant; needs TLS"),
		valued(0, "admin", "USERS", "users taken for admins when a host's agent vouches for them, as root is (comma-separated): the cluster's first administrators"),
		valued(0, "tpm-policy", "FILE", "ask every node for a TPM quote before it registers and every --attest-every (drained when it fails): FILE lists the endorsement keys allowed and the PCR values expected, as JSON ({\"pcrs\": {\"7\": \"<sha256 hex>\"}, \"endorsement_keys\": [\"<fingerprint>\"]})"),
		valued(0, "attest-every", "DURATION", "how often nodes attest again with --tpm-policy (default 10m)"),
		valued(0, "node-ca", "DIR", "sign the certificates of nodes that join with a join token with the authority in DIR (its ca.crt and ca.key)"),
		valued(0, "audit-keep", "N", "keep the newest N audit records (default 200000; -1: all)"),
		valued(0, "audit-retention", "DURATION", "keep audit records this long (default 720h, 30 days; -1s: forever)"),
		flag(0, "metrics-open", "let anyone scrape GET /metrics under --auth (Prometheus sends no token); otherwise it takes an operator's or admin's token"),
		valued(0, "accounting-postgres", "DSN", "stream the accounting records into this PostgreSQL database (a libpq connection string or postgres:// URL; the leader writes, resuming after an outage; docs/accounting-postgres.md)"),
	}, append(tlsOptions(), raftOptions()...)...)...)
	if err != nil {
		return err
	}
	for _, req := range []string{"id", "data", "raft", "http"} {
		if o.get(req) == "" {
			return fmt.Errorf("ctld: --%s is required (see corral ctld --help)", req)
		}
	}
	cfg, err := ctldConfig(o)
	if err != nil {
		return err
	}
	c, err := ctld.New(cfg)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

func ctldConfig(o *optSet) (ctld.Config, error) {
	log, err := newLogger(os.Stderr, orString(o.get("log-level"), "info"))
	if err != nil {
		return ctld.Config{}, err
	}
	peers, err := ctld.ParsePeers(o.get("peers"))
	if err != nil {
		return ctld.Config{}, err
	}
	parts, err := parsePartitions(orString(o.get("partitions"), "batch*"))
	if err != nil {
		return ctld.Config{}, err
	}
	if f := o.get("partitions-file"); f != "" {
		if parts, err = readPartitionsFile(f); err != nil {
			return ctld.Config{}, err
		}
	}
	if parts, err = markQueueUnfit(parts, o.list("queue-unfit")); err != nil {
		return ctld.Config{}, err
	}
	timeout, err := parseDuration("node-timeout", o.get("node-timeout"), 10*time.Second)
	if err != nil {
		return ctld.Config{}, err
	}
	var defMem int64
	if v := o.get("def-mem-per-cpu"); v != "" {
		if defMem, err = submit.ParseMemory(v); err != nil {
			return ctld.Config{}, fmt.Errorf("--def-mem-per-cpu: %w", err)
		}
	}
	policy, err := backfillPolicy(o.get("backfill"))
	if err != nil {
		return ctld.Config{}, err
	}
	keep, retention, err := auditLimits(o)
	if err != nil {
		return ctld.Config{}, err
	}
	tpmPolicy, attestEvery, err := attestOptions(o)
	if err != nil {
		return ctld.Config{}, err
	}
	var httpT ctld.HTTPTimeouts
	if httpT.Header, err = parseDuration("http-header-timeout", o.get("http-header-timeout"), 0); err != nil {
		return ctld.Config{}, err
	}
	if httpT.Body, err = parseDuration("http-body-timeout", o.get("http-body-timeout"), 0); err != nil {
		return ctld.Config{}, err
	}
	limits, err := rateLimits(o)
	if err != nil {
		return ctld.Config{}, err
	}
	tuning, err := raftTuning(o)
	if err != nil {
		return ctld.Config{}, err
	}
	return ctld.Config{
		ID: o.get("id"), DataDir: o.get("data"), RaftAddr: o.get("raft"), HTTPAddr: o.get("http"),
		Peers: peers, Partitions: parts, NodeTimeout: timeout, DefMemPerCPU: defMem, Policy: policy, Logger: log,
		HTTP: httpT, TLS: tlsFiles(o), Auth: o.has("auth"), AuditKeep: keep, AuditRetention: retention, RateLimits: limits, NodeCA: o.get("node-ca"), Admins: o.list("admin"),
		TPMPolicy: tpmPolicy, AttestEvery: attestEvery, MetricsOpen: o.has("metrics-open"), AccountingPostgres: o.get("accounting-postgres"), Raft: tuning, Join: o.list("join"),
	}, nil
}

// rateLimits reads --rate-writes, --rate-write-burst, --rate-reads and
// --rate-read-burst; what is not given takes ctld's default.
func rateLimits(o *optSet) (ctld.RateLimits, error) {
	var l ctld.RateLimits
	var err error
	if l.Writes, err = parseRate("rate-writes", o.get("rate-writes")); err != nil {
		return l, err
	}
	if l.Reads, err = parseRate("rate-reads", o.get("rate-reads")); err != nil {
		return l, err
	}
	if l.WriteBurst, err = parseBurst("rate-write-burst", o.get("rate-write-burst")); err != nil {
		return l, err
	}
	if l.ReadBurst, err = parseBurst("rate-read-burst", o.get("rate-read-burst")); err != nil {
		return l, err
	}
	return l, nil
}

// parseRate reads a rate limit: N or N/s requests a second (a fraction
// allowed), or off (or a negative N); "" is 0 (the default) and off is -1
// (unlimited).
func parseRate(name, v string) (float64, error) {
	switch v {
	case "":
		return 0, nil
	case "off":
		return -1, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
	if err == nil && n < 0 {
		return -1, nil
	}
	if err != nil || !(n > 0) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("--%s=%s: not a rate: give requests a second, e.g. 50 or 0.5/s, or off for no limit", name, v)
	}
	return n, nil
}

// parseBurst reads a burst: a whole number of requests, at least 1; "" is
// 0 (the default).
func parseBurst(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--%s=%s: not a burst: give a whole number of requests, at least 1, e.g. 200", name, v)
	}
	return n, nil
}

// markQueueUnfit sets QueueUnfit on the partitions named by --queue-unfit,
// adding those not configured otherwise.
func markQueueUnfit(parts []api.Partition, names []string) ([]api.Partition, error) {
	for _, name := range names {
		if why := submit.NameProblem(name, submit.MaxNameBytes); why != "" {
			return nil, fmt.Errorf("--queue-unfit: partition name %q %s", name, why)
		}
		i := slices.IndexFunc(parts, func(p api.Partition) bool { return p.Name == name })
		if i < 0 {
			parts = append(parts, api.Partition{Name: name})
			i = len(parts) - 1
		}
		parts[i].QueueUnfit = true
	}
	return parts, nil
}

// backfillPolicy reads --backfill: easy, conservative, or none (Slurm's
// sched/builtin: strict priority order, which the scheduler calls fcfs).
func backfillPolicy(v string) (sched.Policy, error) {
	if v == "none" {
		return sched.PolicyFCFS, nil
	}
	p, err := sched.ParsePolicy(v)
	if err != nil {
		return "", fmt.Errorf("--backfill=%s: use easy, conservative or none", v)
	}
	return p, nil
}

func runNoded(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "noded", getopt.Permute, args, append([]getopt.Option{
		valued(0, "name", "NAME", "node name (default: the host name)"),
		valued(0, "ctld", "URLS", "controller URLs, comma-separated (default $CORRAL_ADDR)"),
		valued(0, "data", "DIR", "directory for per-job state"),
		valued(0, "cpus", "N", "CPUs to offer (default: the host's)"),
		valued(0, "mem", "SIZE", "memory to offer, e.g. 8G (default: the host's)"),
		valued(0, "partitions", "LIST", "partitions this node serves (default: the cluster's default)"),
		valued(0, "features", "LIST", "the node's features, which jobs ask for with --constraint, e.g. intel,ib,rack1 (an operator may replace them: corral node update NAME Features=...)"),
		valued(0, "runner", "NAME", "how jobs run: vm (default: a QEMU VM per job) or process"),
		valued(0, "images", "DIR", "guest images for the vm runner (default $CORRAL_IMAGES or build/images)"),
		valued(0, "vm-ids", "FIRST-LAST", "uids (and gids of the same numbers) reserved for the VMs' QEMU processes, one per running VM; nothing else on the node may use them (default 1879048192-1879113727)"),
		valued(0, "overlay", "ADDR:PORT", "the node's end of its multi-node jobs' private networks (VXLAN over UDP): an IPv4 address of this node on the network between the nodes and a UDP port, e.g. 192.0.2.1:4789 (default: the address this node reaches the first controller from, port 4789; none when that controller is on loopback); none: no VM of a multi-node job runs here"),
		valued(0, "warm-max", "N", "warm starts: how many snapshots of booted guests the vm runner keeps in DATA/warm, one per shape of VM, to restore job VMs from instead of booting them (default 8; 0 turns warm starts off)"),
		valued(0, "warm-max-bytes", "SIZE", "warm starts: how much disk the snapshots may take (default 4G)"),
		valued(0, "warm-settle", "DURATION", "warm starts: how long a snapshot's guest idles before it is saved, so that the cached attributes of the node's files (60 s on the root mount) have expired in every copy (default 65s; 0 saves it at once, for tests)"),
		valued(0, "listen", "HOST:PORT", "the job API's address, which the controllers proxy exec, cp, attach and signals to (default 127.0.0.1:0: a free port on loopback; on a cluster give an address the controllers can reach, or none)"),
		valued(0, "step-listen", "HOST:PORT", "where srun inside this node's jobs reaches the controllers through the daemon (default 127.0.0.1:0, a free loopback port kept over restarts, for the process runner; none)"),
		valued(0, "metrics-addr", "HOST:PORT", "serve the daemon's Prometheus metrics at http://HOST:PORT/metrics (docs/metrics.md); none by default"),
		valued(0, "checkpoint-dir", "DIR", "where jobs' checkpoints are written (corral checkpoint; default DATA/checkpoints)"),
		flag(0, "checkpoint-shared", "--checkpoint-dir is shared with other nodes at the same path: they may restore the checkpoints written here"),
		valued(0, "health-check", "PROGRAM", "the node's health check (Slurm's HealthCheckProgram): while it fails the controllers drain the node, with its output as the reason"),
		valued(0, "health-interval", "DURATION", "how often the health check runs (default 5m)"),
		valued(0, "health-timeout", "DURATION", "how long one run of the health check may take before it counts as failed (default 60s)"),
		valued(0, "run-jobs-as", "user|daemon", "whose credentials jobs run with: user (default: the job's user as this host's passwd and group know it; jobs of unknown users are refused) or daemon (this daemon's own user, for test clusters)"),
		valued(0, "topology-root", "DIR", "read the NUMA topology and SR-IOV functions from a fixture tree (sys/, proc/) instead of the host's"),
		valued(0, "gpus-file", "FILE", "read the GPUs from a JSON list instead of NVML (fixtures, demos)"),
		valued(0, "tmp-dir", "DIR", "the node's scratch file system, whose size jobs ask for with sbatch --tmp (default /tmp)"),
		valued(0, "tmp", "SIZE", "the scratch space to offer instead of --tmp-dir's size, e.g. 100G"),
		valued(0, "on-exit", "keep|kill", "what a stopped daemon does with running jobs: keep them for the next daemon to re-adopt (default; it must register within the node's lease, half the controllers' --node-timeout, or the node's lease keeper stops them), or kill them (QMP quit, then SIGKILL) before a node shutdown"),
		valued(0, "tpm", "PATH", "prove with this TPM (/dev/tpmrm0, or an swtpm socket) what the node booted, before registering and every --attest-every, as controllers started with --tpm-policy ask"),
		valued(0, "attest-every", "DURATION", "how often to attest again with --tpm (default 10m; the controllers refuse a registration whose last attestation is older than twice theirs)"),
		valued(0, "join", "TOKEN", "join the cluster with a join token (corral token create --join): get the node's certificate from the controllers, kept in DATA/credential/, instead of --tls-cert and --tls-key (needs --tls-ca)"),
		valued(0, "authd-socket", "PATH", "also run the host's identity agent (corral authd) on this Unix socket, vouching for local users with the node's certificate (needs --tls-cert, --tls-key and --tls-ca; the CLI's default is "+authd.DefaultSocket+")"),
		valued(0, "log-level", "LEVEL", "debug, info, warn or error (default info)"),
	}, tlsOptions()...)...)
	if err != nil {
		return err
	}
	if o.get("data") == "" {
		return fmt.Errorf("noded: --data is required: a directory for per-job state")
	}
	if v := o.get("on-exit"); v != "" && v != "keep" && v != "kill" {
		return fmt.Errorf("noded: --on-exit=%s: use keep or kill", v)
	}
	if o.get("join") != "" {
		name := o.get("name")
		if name == "" {
			if name, err = os.Hostname(); err != nil {
				return fmt.Errorf("noded: --name is required (host name unknown: %w)", err)
			}
			o.last["name"] = name
		}
		if err := joinCluster(ctx, o, name, orString(o.get("ctld"), env.getenv("CORRAL_ADDR"))); err != nil {
			return err
		}
	}
	if o.get("authd-socket") != "" && !tlsFiles(o).Enabled() {
		return errors.New("noded: --authd-socket needs the node's certificate, whose key signs the tokens: give --tls-cert, --tls-key and --tls-ca")
	}
	addrs := orString(o.get("ctld"), env.getenv("CORRAL_ADDR"))
	if addrs == "" {
		return fmt.Errorf("noded: --ctld is required: the controllers' URLs, e.g. http://127.0.0.1:7001")
	}
	var tlsCfg *tls.Config
	if files := tlsFiles(o); files.Enabled() {
		if files.Cert == "" || files.Key == "" {
			return errors.New("noded: --tls-cert and --tls-key are required with --tls-ca: the node's certificate (corral ca issue --role node --name NAME)")
		}
		if tlsCfg, err = files.Client(); err != nil {
			return fmt.Errorf("noded: %w", err)
		}
		tlsCfg.VerifyConnection = pki.RequireRole(pki.RoleMember) // only the cluster's controllers
	}
	cl, err := api.NewTLSClient(addrs, tlsCfg)
	if err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, orString(o.get("log-level"), "info"))
	if err != nil {
		return err
	}
	cfg, err := nodedConfig(o, cl, log)
	if err != nil {
		return err
	}
	if cfg.Runner, err = makeRunner(ctx, env, o, log, cfg.Inventory, strings.Split(addrs, ","), filepath.Join(cfg.DataDir, "warm"), false); err != nil {
		return err
	}
	d, err := noded.New(cfg)
	if err != nil {
		return err
	}
	d.Shutdown(o.get("on-exit") == "kill")
	if path := o.get("tpm"); path != "" {
		if err := startAttesting(ctx, o, cl, cfg.Name, path, log); err != nil {
			return err
		}
	}
	if sock := o.get("authd-socket"); sock != "" {
		return runNodedWithAgent(ctx, d, authd.Config{Socket: sock, Files: tlsFiles(o), Log: log.With("node", cfg.Name)})
	}
	return d.Run(ctx)
}

func nodedConfig(o *optSet, cl *api.Client, log *slog.Logger) (noded.Config, error) {
	name := o.get("name")
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return noded.Config{}, fmt.Errorf("noded: --name is required (host name unknown: %w)", err)
		}
		name = h
	}
	inv, err := discoverInventory(o.get("topology-root"), o.get("gpus-file"), log)
	if err != nil {
		return noded.Config{}, fmt.Errorf("noded %s: %w", name, err)
	}
	cpus := noded.HostCPUs()
	if o.get("topology-root") != "" && inv != nil {
		cpus = topologyCPUs(inv) // a fixture host offers what its topology holds, unless told
	}
	if v := o.get("cpus"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return noded.Config{}, fmt.Errorf("noded %s: --cpus=%s: give a positive number", name, v)
		}
		cpus = n
	}
	mem := noded.HostMemMB()
	if o.get("topology-root") != "" && inv != nil {
		mem = 0
		for _, n := range inv.Topology.Nodes {
			mem += n.MemMB
		}
	}
	if v := o.get("mem"); v != "" {
		m, err := submit.ParseMemory(v)
		if err != nil {
			return noded.Config{}, fmt.Errorf("noded %s: --mem: %w", name, err)
		}
		mem = m
	}
	if inv != nil && topologyCPUs(inv) != cpus {
		// The node offers more or fewer CPUs than its topology holds (an
		// oversubscribed test node, say): CPU ids could not be honoured.
		log.Warn("--cpus differs from the NUMA topology's CPUs: jobs get no NUMA placement on this node",
			"node", name, "cpus", cpus, "topology_cpus", topologyCPUs(inv))
		inv = nil
	}
	scaleNUMAMemory(inv, mem)
	for _, f := range o.list("features") {
		if why := submit.FeatureProblem(f); why != "" {
			return noded.Config{}, fmt.Errorf("noded %s: --features: feature %q %s", name, f, why)
		}
	}
	tmp, err := scratchMB(o.get("tmp-dir"), o.get("tmp"))
	if err != nil {
		return noded.Config{}, fmt.Errorf("noded %s: %w", name, err)
	}
	cfg := noded.Config{
		Name: name, CPUs: cpus, MemMB: mem, TmpMB: tmp, Partitions: o.list("partitions"), Features: o.list("features"), Inventory: inv,
		DataDir: o.get("data"), Client: cl, Logger: log.With("node", name),
		RunJobsAs: o.get("run-jobs-as"), APIListen: apiListen(o.get("listen")), TLS: tlsFiles(o),
		StepListen:    stepListen(o.get("step-listen"), o.get("runner")),
		MetricsListen: o.get("metrics-addr"), HealthCheck: o.get("health-check"),
		CheckpointDir: o.get("checkpoint-dir"), CheckpointShared: o.has("checkpoint-shared"),
	}
	if cfg.CheckpointShared && cfg.CheckpointDir == "" {
		return cfg, fmt.Errorf("noded: --checkpoint-shared needs --checkpoint-dir naming the shared directory")
	}
	if cfg.HealthInterval, err = parseDuration("health-interval", o.get("health-interval"), 5*time.Minute); err != nil {
		return noded.Config{}, fmt.Errorf("noded %s: %w", name, err)
	}
	if cfg.HealthTimeout, err = parseDuration("health-timeout", o.get("health-timeout"), time.Minute); err != nil {
		return noded.Config{}, fmt.Errorf("noded %s: %w", name, err)
	}
	if p := cfg.HealthCheck; p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return noded.Config{}, fmt.Errorf("noded %s: --health-check=%s: not an executable file (%v)", name, p, err)
		}
	}
	if inv != nil {
		// Free hugepages and GPUs change while the node runs: look again
		// every minute (quietly) and report what changed.
		root, gpusFile := o.get("topology-root"), o.get("gpus-file")
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg.Rediscover = func() *api.Inventory {
			again, err := discoverInventory(root, gpusFile, quiet)
			if err != nil || again == nil || topologyCPUs(again) != cpus {
				return inv
			}
			scaleNUMAMemory(again, mem)
			return again
		}
	}
	return cfg, nil
}

// apiListen is the node's job API address for --listen: loopback when
// unset, none for "none".
// stepListen is where the step forwarder listens: loopback for the
// process runner's jobs, which run on the host; none for VMs, whose
// guests do not reach the node's loopback.
func stepListen(v, runner string) string {
	switch {
	case v == "none" || v == "" && runner != "process":
		return ""
	case v == "":
		return "127.0.0.1:0"
	}
	return v
}

func apiListen(v string) string {
	switch v {
	case "":
		return "127.0.0.1:0"
	case "none":
		return ""
	}
	return v
}

// scaleNUMAMemory makes the NUMA nodes' memory add up to what the node
// offers (--mem, or its share of the host in `corral dev`): each keeps its
// proportion. Placement then never promises a NUMA node more than the node
// as a whole accounts for.
func scaleNUMAMemory(inv *api.Inventory, offered int64) {
	if inv == nil || inv.Topology == nil {
		return
	}
	var total int64
	for _, n := range inv.Topology.Nodes {
		total += n.MemMB
	}
	if total <= 0 || total == offered {
		return
	}
	for i := range inv.Topology.Nodes {
		n := &inv.Topology.Nodes[i]
		n.MemMB = n.MemMB * offered / total
		n.FreeMB = min(n.FreeMB*offered/total, n.MemMB)
	}
}

func topologyCPUs(inv *api.Inventory) int {
	n := 0
	for _, node := range inv.Topology.Nodes {
		n += len(node.CPUs)
	}
	return n
}

// discoverInventory reads the node's NUMA topology and SR-IOV functions
// (from root when given, else the host) and its GPUs (from gpusFile when
// given, else NVML). A host whose topology cannot be read runs without
// one, saying so: its jobs get no NUMA placement, and no GPUs or VFs.
func discoverInventory(root, gpusFile string, log *slog.Logger) (*api.Inventory, error) {
	inv := &api.Inventory{}
	t, err := hardware.Topology(root)
	switch {
	case err != nil && root != "":
		return nil, fmt.Errorf("--topology-root=%s: %w", root, err)
	case err != nil:
		log.Warn("NUMA topology unknown: jobs get no NUMA placement", "err", err)
	default:
		inv.Topology = t
	}
	if inv.PFs, err = hardware.SRIOV(root); err != nil {
		log.Warn("SR-IOV functions unknown", "err", err)
	}
	if gpusFile != "" {
		data, err := os.ReadFile(gpusFile)
		if err != nil {
			return nil, fmt.Errorf("--gpus-file: %w", err)
		}
		if err := json.Unmarshal(data, &inv.GPUs); err != nil {
			return nil, fmt.Errorf("--gpus-file=%s: not a JSON list of GPUs: %w", gpusFile, err)
		}
	} else if inv.GPUs, err = hardware.GPUs(); err != nil {
		log.Warn("GPUs unknown (NVML)", "err", err)
	}
	if inv.Topology == nil {
		return nil, nil
	}
	log.Info("inventory", "numa_nodes", len(inv.Topology.Nodes), "gpus", len(inv.GPUs), "sriov_pfs", len(inv.PFs))
	return inv, nil
}

func runDev(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "dev", getopt.Permute, args,
		valued(0, "data", "DIR", "state directory (default: corral/dev under your cache dir)"),
		valued(0, "http", "HOST:PORT", "API address (default 127.0.0.1:6817)"),
		valued(0, "raft", "HOST:PORT", "Raft address (default 127.0.0.1:6820)"),
		valued(0, "nodes", "N", "node daemons to run (default 2)"),
		valued(0, "cpus", "N", "CPUs per node (default: the host's)"),
		valued(0, "mem", "SIZE", "memory per node (default: the host's divided among the nodes)"),
		valued(0, "runner", "NAME", "how jobs run: vm (default: a QEMU VM per job) or process"),
		valued(0, "images", "DIR", "guest images for the vm runner (default $CORRAL_IMAGES or build/images)"),
		valued(0, "run-jobs-as", "user|daemon", "whose credentials jobs run with: daemon (default: this process's user, the embedded cluster's only user) or user (each job's user as this host knows it)"),
		flag(0, "fresh", "delete the state directory first"),
		flag(0, "secure", "run over TLS with authentication: an authority of its own in the state directory, certificates for the controller, the nodes and a host agent, whose socket the CLI uses (the user running dev is an admin)"),
		valued(0, "log-level", "LEVEL", "debug, info, warn or error (default info)"),
	)
	if err != nil {
		return err
	}
	dir := o.get("data")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("dev: no cache dir (%v): give --data DIR", err)
		}
		dir = filepath.Join(cache, "corral", "dev")
	}
	if o.has("fresh") {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("dev: removing %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	return runDevCluster(ctx, env, o, dir)
}

func runDevCluster(ctx context.Context, env *cliEnv, o *optSet, dir string) error {
	log, err := newLogger(env.stderr, orString(o.get("log-level"), "info"))
	if err != nil {
		return err
	}
	httpAddr := orString(o.get("http"), strings.TrimPrefix(defaultDevAddr, "http://"))
	raftAddr := orString(o.get("raft"), "127.0.0.1:6820")
	// The node options are checked before the controller starts: a
	// controller that New started holds its ports until Run ends.
	n, err := strconv.Atoi(orString(o.get("nodes"), "2"))
	if err != nil || n < 1 {
		return fmt.Errorf("dev: --nodes=%s: give a positive number", o.get("nodes"))
	}
	var cfgs []noded.Config
	for i := 1; i <= n; i++ {
		sub := &optSet{last: map[string]string{"name": fmt.Sprintf("n%d", i), "data": filepath.Join(dir, fmt.Sprintf("n%d", i))}, all: map[string][]string{}}
		if v := o.get("cpus"); v != "" {
			sub.last["cpus"] = v
		}
		sub.last["run-jobs-as"] = orString(o.get("run-jobs-as"), noded.RunAsDaemon)
		sub.last["mem"] = orString(o.get("mem"), fmt.Sprintf("%dM", noded.HostMemMB()/int64(n)))
		cfg, err := nodedConfig(sub, nil, log)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, cfg)
	}
	// One runner serves every node: the vm runner's probe boots a guest.
	// The controller listens on loopback, which no guest reaches anyway.
	runner, err := makeRunner(ctx, env, o, log, nil, nil, filepath.Join(dir, "warm"), true)
	if err != nil {
		return err
	}
	for i := range cfgs {
		cfgs[i].Runner = runner
		if vr, ok := runner.(*vmrun.Runner); ok {
			// The nodes share the host's network namespace: each gets
			// a port of its own for its jobs' private networks.
			if cfgs[i].Runner, err = devOverlay(vr); err != nil {
				return err
			}
		}
	}
	ccfg := ctld.Config{
		ID: "dev", RaftAddr: raftAddr, HTTPAddr: httpAddr, DataDir: filepath.Join(dir, "ctld"),
		Peers: []ctld.Peer{{ID: "dev", Addr: raftAddr}}, Logger: log,
	}
	var sec *devSecurity
	if o.has("secure") {
		if sec, err = newDevSecurity(dir, n); err != nil {
			return err
		}
		ccfg.TLS, ccfg.Auth, ccfg.NodeCA, ccfg.Admins = sec.member, true, sec.caDir, devAdmins()
		for i := range cfgs {
			cfgs[i].TLS = sec.nodes[i]
		}
	}
	c, err := ctld.New(ccfg)
	if err != nil {
		return err
	}
	daemons, err := devDaemons(c, cfgs, sec)
	if err != nil {
		// Run with an ended context releases what New started.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Run(done)
		return err
	}
	scheme := "http"
	if sec != nil {
		scheme = "https"
	}
	fmt.Fprintf(env.stdout, "corral dev: controller at %s://%s with %d nodes; state in %s\n", scheme, c.HTTPAddr(), n, dir)
	fmt.Fprintf(env.stdout, "corral dev: export CORRAL_ADDR=%s://%s\n", scheme, c.HTTPAddr())
	if sec != nil {
		fmt.Fprintf(env.stdout, "corral dev: export CORRAL_CA=%s CORRAL_AUTHD=%s\n", filepath.Join(sec.caDir, pki.CACertFile), sec.socket)
	}

	dctx, stopDaemons := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if sec != nil {
		wg.Add(1)
		go func() { defer wg.Done(); sec.serveAgent(dctx, log) }()
	}
	for _, d := range daemons {
		wg.Add(1)
		go func(d *noded.Daemon) { defer wg.Done(); _ = d.Run(dctx) }(d)
	}
	cctx, stopCtld := context.WithCancel(context.Background())
	cdone := make(chan error, 1)
	go func() { cdone <- c.Run(cctx) }()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-cdone:
	}
	// A clean stop: jobs first, then the daemons, then the controller.
	for _, d := range daemons {
		d.KillAll()
	}
	stopDaemons()
	wg.Wait()
	stopCtld()
	if runErr == nil {
		runErr = <-cdone
	}
	fmt.Fprintln(env.stdout, "corral dev: stopped")
	return runErr
}

// devDaemons creates the dev cluster's node daemons, talking to c: over
// TLS, each with its own certificate, when sec is set.
func devDaemons(c *ctld.Controller, cfgs []noded.Config, sec *devSecurity) ([]*noded.Daemon, error) {
	cl, err := api.NewClient("http://" + c.HTTPAddr())
	if err != nil {
		return nil, err
	}
	var daemons []*noded.Daemon
	for i, cfg := range cfgs {
		cfg.Client = cl
		if sec != nil {
			if cfg.Client, err = sec.nodeClient(i, c.HTTPAddr()); err != nil {
				return nil, err
			}
		}
		d, err := noded.New(cfg)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
	}
	return daemons, nil
}

// makeRunner builds the runner --runner names: vm (the default), whose
// accelerator probe boots a test guest, or process (nil: the daemon's
// built-in runner), for hosts without QEMU. The vm runner keeps the
// guests of a partition whose network is node from reaching controllers.
// With probe it probes here (corral dev: one runner for every node, and a
// failed probe must stop the command); without, the node daemon probes it
// after it registered, so that a restarted daemon keeps the lease of the
// VMs it re-adopts.
func makeRunner(ctx context.Context, env *cliEnv, o *optSet, log *slog.Logger, inv *api.Inventory, controllers []string, warmDir string, probe bool) (noded.Runner, error) {
	switch o.get("runner") {
	case "process":
		return nil, nil
	case "", "vm":
		root := orString(o.get("images"), env.getenv("CORRAL_IMAGES"))
		if root == "" {
			root = defaultImageRoot()
		}
		ids, err := parseIDRange(o.get("vm-ids"))
		if err != nil {
			return nil, err
		}
		cfg := vmrun.Config{ImageRoot: root, DefaultImage: "default", Logger: log, Inventory: inv,
			Controllers: controllers, VMIDs: ids, WarmDir: warmDir}
		if err := warmOptions(o, &cfg); err != nil {
			return nil, err
		}
		if cfg.Overlay, err = overlayOption(ctx, o.get("overlay"), controllers, log); err != nil {
			return nil, err
		}
		load := vmrun.Load
		if probe {
			load = func(cfg vmrun.Config) (*vmrun.Runner, error) { return vmrun.New(ctx, cfg) }
		}
		r, err := load(cfg)
		if err != nil {
			return nil, fmt.Errorf("--runner vm: %w (on a host without QEMU, use --runner process)", err)
		}
		log.Info("vm runner loaded", "images", r.Images(), "accel", r.Accel(), "overhead_mb", r.OverheadMB())
		return r, nil
	}
	return nil, fmt.Errorf("--runner=%s: unknown runner (available: process, vm)", o.get("runner"))
}

// warmOptions reads --warm-max, --warm-max-bytes and --warm-settle into
// cfg: a maximum of 0 turns warm starts off.
func warmOptions(o *optSet, cfg *vmrun.Config) error {
	if v := o.get("warm-max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1000 {
			return fmt.Errorf("--warm-max=%s: give a number of snapshots from 0 (no warm starts) to 1000", v)
		}
		if n == 0 {
			cfg.WarmDir = ""
		}
		cfg.WarmMax = n
	}
	if v := o.get("warm-max-bytes"); v != "" {
		mb, err := submit.ParseMemory(v)
		if err != nil || mb <= 0 {
			return fmt.Errorf("--warm-max-bytes=%s: give a size such as 4G", v)
		}
		cfg.WarmMaxBytes = mb << 20
	}
	if v := o.get("warm-settle"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("--warm-settle=%s: give a duration such as 65s, or 0", v)
		}
		if cfg.WarmSettle = d; d == 0 {
			cfg.WarmSettle = -1 // at once
		}
	}
	return nil
}

// parseIDRange reads --vm-ids FIRST-LAST; "" is the runner's default.
func parseIDRange(s string) (vmrun.IDRange, error) {
	if s == "" {
		return vmrun.IDRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil || last < first {
		return vmrun.IDRange{}, fmt.Errorf("--vm-ids=%s: give FIRST-LAST, two uids with FIRST <= LAST (e.g. 1879048192-1879113727)", s)
	}
	return vmrun.IDRange{First: uint32(first), Count: uint32(last - first + 1)}, nil
}

// defaultImageRoot finds build/images in the working directory or beside
// the binary's checkout (bin/corral → build/images).
func defaultImageRoot() string {
	if st, err := os.Stat("build/images"); err == nil && st.IsDir() {
		abs, _ := filepath.Abs("build/images")
		return abs
	}
	if exe, err := os.Executable(); err == nil {
		return filepath.Join(filepath.Dir(filepath.Dir(exe)), "build", "images")
	}
	return "build/images"
}

// auditLimits reads --audit-keep and --audit-retention; zero is the
// controllers' default, a negative value no limit.
func auditLimits(o *optSet) (int, time.Duration, error) {
	keep := 0
	if v := o.get("audit-keep"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 {
			return 0, 0, &optionError{"audit-keep", v, "give a number of records, or -1 to keep all", err}
		}
		keep = n
	}
	var retention time.Duration
	if v := o.get("audit-retention"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d == 0 {
			return 0, 0, &optionError{"audit-retention", v, "give a duration (720h), or -1s to keep records forever", err}
		}
		retention = d
	}
	return keep, retention, nil
}

// scratchMB is the scratch space a node offers for sbatch --tmp: size when
// given, else the size of the file system at dir (default /tmp).
func scratchMB(dir, size string) (int64, error) {
	if size != "" {
		m, err := submit.ParseMemory(size)
		if err != nil {
			return 0, fmt.Errorf("--tmp=%s: %s", size, sizeProblem(err))
		}
		return m, nil
	}
	if dir == "" {
		dir = "/tmp"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("--tmp-dir %s: %w", dir, err)
	}
	return int64(st.Blocks) * st.Bsize >> 20, nil
}
