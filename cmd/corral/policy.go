package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
	"corral/submit"
)

// This file holds the administrator's policy commands: config, qos,
// account and user. Each takes an action first (corral qos add NAME ...);
// the controller checks every change again and refuses a bad one with a
// message naming the field.

// action is one verb of a command that takes verbs.
type action struct {
	synopsis string
	run      func(ctx context.Context, env *cliEnv, cmd string, args []string) error
}

// runActions dispatches args[0] among actions, listed in order in errors
// and help.
func runActions(ctx context.Context, env *cliEnv, cmd string, order []string, actions map[string]action, args []string) error {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		fmt.Fprintf(env.stdout, "usage:\n")
		for _, name := range order {
			fmt.Fprintf(env.stdout, "  %s\n", strings.TrimSpace(strings.Join([]string{env.prog, cmd, name, actions[name].synopsis}, " ")))
		}
		fmt.Fprintf(env.stdout, "\nRun '%s %s ACTION --help' for an action's options.\n", env.prog, cmd)
		return errHelp
	}
	if len(args) == 0 {
		return fmt.Errorf("%s: give an action: %s (run '%s %s --help' for their forms)", cmd, strings.Join(order, ", "), env.prog, cmd)
	}
	a, ok := actions[args[0]]
	if !ok {
		return fmt.Errorf("%s: unknown action %q (actions: %s)", cmd, args[0], strings.Join(order, ", "))
	}
	return a.run(ctx, env, cmd+" "+args[0], args[1:])
}

// optionError is a bad value of a command-line option: it names the option
// and the value and says what to give instead. It unwraps to the parser's
// error, when there is one.
type optionError struct {
	option, value, hint string
	err                 error
}

func (e *optionError) Error() string {
	return fmt.Sprintf("--%s=%s: %s", e.option, e.value, e.hint)
}

func (e *optionError) Unwrap() error { return e.err }

// wholeOption reads option name as a whole number ≥ 0.
func wholeOption(o *optSet, name, example string) (int64, error) {
	v := o.get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &optionError{name, v, "give a whole number ≥ 0 (e.g. --" + name + "=" + example + ")", err}
	}
	return n, nil
}

// limitOption reads a per-user or group limit: a whole number ≥ 0, where 0
// is unlimited.
func limitOption(o *optSet, name string) (int, error) {
	v := o.get(name)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &optionError{name, v, "give a whole number ≥ 0, or 0 for no limit (e.g. --" + name + "=10)", err}
	}
	return n, nil
}

// timeOption reads a duration in sbatch --time's grammar, as seconds;
// UNLIMITED (and 0) is no limit.
func timeOption(o *optSet, name string) (int64, error) {
	v := o.get(name)
	secs, err := submit.ParseTimeLimit(v)
	if err != nil {
		return 0, &optionError{name, v, "give a time as sbatch --time takes it: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED for no limit (e.g. --" + name + "=2-00:00:00)", err}
	}
	return secs, nil
}

// sharesOption reads a number of fair-share shares ≥ 0.
func sharesOption(o *optSet) (float64, error) {
	v := o.get("shares")
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, &optionError{"shares", v, "give a number of shares ≥ 0 (e.g. --shares=10)", err}
	}
	return n, nil
}

// oneName returns the single NAME argument of an action.
func oneName(o *optSet, cmd, what, example string) (string, error) {
	if len(o.args) != 1 {
		return "", fmt.Errorf("%s: give one %s name (e.g. corral %s)", cmd, what, example)
	}
	name := o.args[0]
	if name == "" || strings.ContainsAny(name, ", \t\n=") {
		return "", fmt.Errorf("%s: %q is not a valid %s name (names cannot be empty or hold commas, spaces or '=')", cmd, name, what)
	}
	return name, nil
}

// noArgs refuses stray arguments to an action that takes none.
// listPolicy parses a listing command's options (it takes no arguments)
// and fetches the policy it lists.
func listPolicy(ctx context.Context, env *cliEnv, cmd string, args []string, opts ...getopt.Option) (*optSet, *api.PolicyView, error) {
	o, err := parseOpts(env, cmd, getopt.Permute, args, opts...)
	if err != nil {
		return nil, nil, err
	}
	if err := noArgs(o, cmd); err != nil {
		return nil, nil, err
	}
	cl, err := env.client()
	if err != nil {
		return nil, nil, err
	}
	p, err := cl.Policy(ctx)
	return o, p, err
}

// deleteNamed runs a delete command: one name, no options, then put.
func deleteNamed(ctx context.Context, env *cliEnv, cmd string, args []string, what, example string, put func(*api.Client, string) error) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args)
	if err != nil {
		return err
	}
	name, err := oneName(o, cmd, what, example)
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return put(cl, name)
}

func noArgs(o *optSet, cmd string) error {
	if len(o.args) > 0 {
		return fmt.Errorf("%s: unexpected argument %q (%s takes options only)", cmd, o.args[0], cmd)
	}
	return nil
}

func runConfig(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "config", []string{"show", "set"}, map[string]action{
		"show": {"", configShow},
		"set":  {"NAME=VALUE [NAME=VALUE...]", configSet},
	}, args)
}

func configShow(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	_, p, err := listPolicy(ctx, env, cmd, args)
	if err != nil {
		return err
	}
	return display.Config(env.stdout, &p.Config)
}

func configSet(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args)
	if err != nil {
		return err
	}
	if len(o.args) == 0 {
		return fmt.Errorf("%s: give NAME=VALUE pairs, e.g. %s %s PriorityWeightFairshare=5000 (settings: %s)",
			cmd, env.prog, cmd, strings.Join(api.ConfigKeys(), ", "))
	}
	// Check every pair here first, so that a typo in the last one does
	// not leave the others applied by a half-understood command line. The
	// controller checks them again against its configuration.
	req := api.ConfigRequest{}
	scratch := api.DefaultSchedConfig()
	for _, arg := range o.args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok || k == "" {
			return fmt.Errorf("%s: %q is not NAME=VALUE (e.g. PriorityMaxAge=168h; settings: %s)", cmd, arg, strings.Join(api.ConfigKeys(), ", "))
		}
		if err := scratch.Set(k, v); err != nil {
			return fmt.Errorf("%s: %s: %w", cmd, arg, err)
		}
		req.Settings = append(req.Settings, [2]string{k, v})
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return cl.SetConfig(ctx, req)
}

// qosOptions are the options of qos add and qos modify.
func qosOptions() []getopt.Option {
	return []getopt.Option{
		valued(0, "priority", "N", "the QoS's priority (its factor is N over the highest QoS priority)"),
		valued(0, "preempt", "QOS,...", "the QoS whose jobs this QoS's jobs may preempt ('' for none)"),
		valued(0, "preempt-mode", "MODE", "what happens to this QoS's jobs when preempted: cancel, requeue, suspend, migrate (to a node with room) or checkpoint (parked until room appears)"),
		valued(0, "preempt-fallback", "MODE", "what happens to a job of --preempt-mode migrate when no node has room for it: cancel (default), requeue, suspend or checkpoint"),
		valued(0, "preempt-exempt-time", "TIME", "a job of this QoS that has run less than TIME is not preempted"),
		valued(0, "max-wall", "TIME", "the longest time limit a job of this QoS may have (UNLIMITED: none)"),
		valued(0, "max-jobs-per-user", "N", "jobs a user may run at once in this QoS (0: no limit)"),
		valued(0, "max-submit-per-user", "N", "jobs a user may have pending or running in this QoS (0: no limit)"),
		valued(0, "grp-cpus", "N", "CPUs all running jobs of this QoS may use together (0: no limit)"),
	}
}

// applyQOSOptions changes q as the options given say, leaving the rest.
func applyQOSOptions(q *api.QOS, o *optSet) error {
	var err error
	if o.has("priority") {
		if q.Priority, err = wholeOption(o, "priority", "100"); err != nil {
			return err
		}
	}
	if o.has("preempt") {
		q.Preempt = nil
		for _, p := range o.list("preempt") {
			if !slices.Contains(q.Preempt, p) {
				q.Preempt = append(q.Preempt, p)
			}
		}
	}
	if o.has("preempt-mode") {
		m, err := api.ParsePreemptMode(o.get("preempt-mode"))
		if err != nil {
			return &optionError{"preempt-mode", o.get("preempt-mode"), "use " + api.PreemptModes, err}
		}
		q.PreemptMode = m
	}
	if o.has("preempt-fallback") {
		m, err := api.ParsePreemptFallback(o.get("preempt-fallback"))
		if err != nil {
			return &optionError{"preempt-fallback", o.get("preempt-fallback"), "use " + api.PreemptFallbacks, err}
		}
		q.PreemptFallback = m
	}
	if o.has("preempt-exempt-time") {
		if q.PreemptExemptTime, err = timeOption(o, "preempt-exempt-time"); err != nil {
			return err
		}
	}
	if o.has("max-wall") {
		if q.MaxWall, err = timeOption(o, "max-wall"); err != nil {
			return err
		}
	}
	for _, lim := range []struct {
		name string
		dst  *int
	}{{"max-jobs-per-user", &q.MaxJobsPerUser}, {"max-submit-per-user", &q.MaxSubmitPerUser}, {"grp-cpus", &q.GrpCPUs}} {
		if o.has(lim.name) {
			if *lim.dst, err = limitOption(o, lim.name); err != nil {
				return err
			}
		}
	}
	return nil
}

func runQOS(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "qos", []string{"add", "modify", "delete", "list"}, map[string]action{
		"add":    {"NAME [--priority N] [--preempt QOS,...] [--preempt-mode MODE] [--max-wall TIME] [...]", qosAdd},
		"modify": {"NAME [options of add]", qosModify},
		"delete": {"NAME", qosDelete},
		"list":   {"", qosList},
	}, args)
}

// findQOS returns the QoS named name in p, or nil.
func findQOS(p *api.PolicyView, name string) *api.QOS {
	for i := range p.QOS {
		if p.QOS[i].Name == name {
			return &p.QOS[i]
		}
	}
	return nil
}

func qosNames(p *api.PolicyView) string {
	names := make([]string, len(p.QOS))
	for i, q := range p.QOS {
		names[i] = q.Name
	}
	return strings.Join(names, ", ")
}

func qosAdd(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return qosPut(ctx, env, cmd, args, false)
}

func qosModify(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return qosPut(ctx, env, cmd, args, true)
}

// qosPut adds a QoS, or modifies one starting from its current settings.
// The controller only knows "put", so add and modify check first that the
// QoS is absent or present, and say which command the user meant.
func qosPut(ctx context.Context, env *cliEnv, cmd string, args []string, modify bool) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args, qosOptions()...)
	if err != nil {
		return err
	}
	name, err := oneName(o, cmd, "QoS", "qos add high --priority 100")
	if err != nil {
		return err
	}
	q := api.QOS{Name: name}
	// Check the values before asking the controller anything.
	if err := applyQOSOptions(&q, o); err != nil {
		return fmt.Errorf("%s %s: %w", cmd, name, err)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	p, err := cl.Policy(ctx)
	if err != nil {
		return err
	}
	old := findQOS(p, name)
	switch {
	case modify && old == nil:
		return fmt.Errorf("%s: no QoS named %s (QoS: %s); add it with: %s qos add %s", cmd, name, qosNames(p), env.prog, name)
	case !modify && old != nil:
		return fmt.Errorf("%s: QoS %s exists; change it with: %s qos modify %s [options]", cmd, name, env.prog, name)
	case modify:
		if len(o.last) == 0 {
			return fmt.Errorf("%s %s: nothing to change: give options such as --priority N (see %s %s --help)", cmd, name, env.prog, cmd)
		}
		q = *old
		_ = applyQOSOptions(&q, o) // checked above
	}
	return cl.PutQOS(ctx, api.QOSRequest{QOS: q})
}

func qosDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return deleteNamed(ctx, env, cmd, args, "QoS", "qos delete besteffort", func(cl *api.Client, name string) error {
		return cl.PutQOS(ctx, api.QOSRequest{QOS: api.QOS{Name: name}, Delete: true})
	})
}

func qosList(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, p, err := listPolicy(ctx, env, cmd, args, flag(0, "json", "print the QoS as JSON"))
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, p.QOS)
	}
	return display.QOSList(env.stdout, p.QOS)
}
