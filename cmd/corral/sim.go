//go:build !corral_client

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/internal/getopt"
	"corral/sim"
)

func runSim(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "sim", getopt.Permute, args,
		valued(0, "policy", "POLICY", "scheduling policy: fcfs, easy (the default) or conservative"),
		valued(0, "cluster", "FILE", "simulate heterogeneous nodes (NUMA, GPUs) described in FILE instead of the trace's machine (see docs/placement.md)"),
		valued(0, "qos", "FILE", "QoS classes and the QoS of each trace queue, as JSON: {\"qos\": [{\"name\": \"high\", \"priority\": 100, \"preempt\": [\"normal\"]}], \"queues\": {\"1\": \"high\"}} (see docs/cli.md)"),
		flag(0, "fairshare", "run each job as its trace user in its group's account, one share each, with the fair-share weight on (PriorityWeightFairshare=10000 unless --set says; --qos sets PriorityWeightQOS=10000 likewise)"),
		valued(0, "set", "NAME=VALUE,...", "scheduler settings as corral config set takes them, e.g. PriorityWeightAge=1000 (every priority weight is 0 unless set, so the queue is the trace's order)"),
		flag(0, "json", "print the results as JSON"),
		flag(0, "progress", "draw a progress bar on stderr even when it is not a terminal"),
	)
	if err != nil {
		return err
	}
	if len(o.args) != 1 {
		return fmt.Errorf("sim: give one trace file in the Standard Workload Format (gzip-compressed or not), e.g. corral sim KTH-SP2-1996-2.1-cln.swf.gz")
	}
	policy, err := sched.ParsePolicy(o.get("policy"))
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	path := o.args[0]
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open the trace: %w", err)
	}
	defer f.Close()
	// Ctrl-C stops the run: main catches the signal into ctx.
	// The figures are printed, never the jobs' outcomes.
	opts := sim.Options{Policy: policy, Stop: ctx.Done(), NoOutcomes: true}
	if file := o.get("cluster"); file != "" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--cluster: %w", err)
		}
		opts.Cluster, err = sim.ReadCluster(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--cluster=%s: %w", file, err)
		}
	}
	if err := simPolicyOptions(o, &opts); err != nil {
		return err
	}
	bar := &progressBar{w: env.stderr, now: time.Now}
	if o.has("progress") || isTerminal(env.stderr) {
		opts.Progress = bar.update
	}
	// The simulation starts while the trace is still being read.
	res, err := sim.RunSWF(f, opts)
	// End the bar's line before anything else is printed.
	bar.finish()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	res.Trace = filepath.Base(path)
	if o.has("json") {
		return sim.WriteJSON(env.stdout, res)
	}
	return sim.WriteText(env.stdout, res)
}

// isTerminal reports whether w is a character device such as a terminal.
// (/dev/null is one too; drawing there costs nothing.)
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws the share of a simulation's jobs that have ended on one
// line it redraws, at most ten times a second: sim.Run calls it once per
// simulated second with ends, tens of thousands of times for a real trace.
type progressBar struct {
	w     io.Writer
	now   func() time.Time
	last  time.Time
	drawn bool
}

// barRefresh is the shortest time between two redraws.
const barRefresh = 100 * time.Millisecond

// barWidth is the number of cells in the bar.
const barWidth = 40

func (p *progressBar) update(done, total int) {
	if total <= 0 {
		return
	}
	now := p.now()
	if done < total && p.drawn && now.Sub(p.last) < barRefresh {
		return
	}
	p.last, p.drawn = now, true
	filled := done * barWidth / total
	fmt.Fprintf(p.w, "\rsimulating [%s%s] %3d%% %d/%d jobs",
		strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), done*100/total, done, total)
}

// finish ends the bar's line so later output starts on a line of its own.
func (p *progressBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// simPolicyOptions reads --qos, --fairshare and --set into opts.
func simPolicyOptions(o *optSet, opts *sim.Options) error {
	if file := o.get("qos"); file != "" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--qos: %w", err)
		}
		opts.QOS, opts.QOSByQueue, err = sim.ReadQOS(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--qos=%s: %w", file, err)
		}
	}
	for _, kv := range o.list("set") {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("--set: %q is not NAME=VALUE (the names of corral config set)", kv)
		}
		cfg := api.DefaultSchedConfig()
		if err := cfg.Set(name, value); err != nil {
			return fmt.Errorf("--set %s: %w", kv, err)
		}
		opts.Settings = append(opts.Settings, [2]string{name, value})
	}
	opts.Fairshare = o.has("fairshare")
	return nil
}
