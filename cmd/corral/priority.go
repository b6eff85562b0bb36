package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
)

// This file holds the commands that explain scheduling: prio (sprio),
// share (sshare) and why.

func runPrio(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "prio", getopt.Permute, args,
		valued('j', "jobs", "IDS", "only these pending jobs (comma-separated, e.g. 12,13_5)"),
		valued('u', "user", "USERS", "only the jobs of these users (comma-separated)"),
		flag('n', "norm", "print the normalized factors (0 to 1) instead of weighted ones"),
		flag('w', "weights", "print the weight of each factor only"),
		flag('h', "noheader", "do not print the header line"),
		flag('l', "long", "accepted for compatibility; every column is always shown"),
		flag(0, "json", "print the rows as JSON"),
	)
	if err != nil {
		return err
	}
	ids, tasks, err := parseJobRefs(append(o.list("jobs"), o.args...))
	if err != nil {
		return fmt.Errorf("--jobs: %w", err)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if o.has("weights") {
		// The weights come with each row, and there are no rows when
		// nothing is pending, so read them from the configuration.
		p, err := cl.Policy(ctx)
		if err != nil {
			return err
		}
		if o.has("json") {
			return writeJSON(env, p.Config.Weights)
		}
		return display.PriorityWeights(env.stdout, p.Config.Weights, o.has("noheader"))
	}
	rows, err := cl.Priorities(ctx)
	if err != nil {
		return err
	}
	rows = filterPriorities(rows, ids, tasks, o.list("user"))
	if o.has("json") {
		return writeJSON(env, rows)
	}
	if (len(ids) > 0 || len(tasks) > 0) && len(rows) == 0 {
		// sprio's answer when -j matches nothing.
		fmt.Fprintln(env.stdout, "Unable to find jobs matching user/id(s) specified")
		return nil
	}
	return display.Priorities(env.stdout, rows, display.PriorityOptions{Normalized: o.has("norm"), NoHeader: o.has("noheader")})
}

// filterPriorities keeps the rows of the jobs and users asked for (all
// when none is). A job id also matches the tasks of that array, and a task
// (12_5) matches its own row or, while it has not started, the row of its
// array's pending tasks (12_[5-9]).
func filterPriorities(rows []api.PriorityRow, ids []uint64, tasks []api.TaskRef, users []string) []api.PriorityRow {
	if len(ids) == 0 && len(tasks) == 0 && len(users) == 0 {
		return rows
	}
	var out []api.PriorityRow
	for _, r := range rows {
		if len(users) > 0 && !slices.Contains(users, r.User) {
			continue
		}
		if (len(ids) > 0 || len(tasks) > 0) && !priorityRowMatches(r, ids, tasks) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func priorityRowMatches(r api.PriorityRow, ids []uint64, tasks []api.TaskRef) bool {
	base, _, _ := strings.Cut(r.Ref, "_")
	for _, id := range ids {
		if r.JobID == id || base == strconv.FormatUint(id, 10) {
			return true
		}
	}
	for _, t := range tasks {
		arr := strconv.FormatUint(t.Array, 10)
		if r.Ref == arr+"_"+strconv.Itoa(t.Task) || (r.JobID == t.Array && strings.HasPrefix(r.Ref, arr+"_[")) {
			return true
		}
	}
	return false
}

func runShare(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "share", getopt.Permute, args,
		valued('A', "accounts", "ACCOUNTS", "only these accounts and their users (comma-separated)"),
		valued('u', "users", "USERS", "show these users' lines (comma-separated) instead of only yours"),
		flag('a', "all", "show every user's lines, not only yours"),
		flag('l', "long", "add the LevelFS column"),
		flag('n', "noheader", "do not print the header lines"),
		flag(0, "json", "print the rows as JSON"),
	)
	if err != nil {
		return err
	}
	if len(o.args) > 0 {
		return fmt.Errorf("share: unexpected argument %q (use -A ACCOUNT or -u USER to choose lines)", o.args[0])
	}
	me := ""
	if !o.has("all") && len(o.list("users")) == 0 {
		if me, err = callerIdentity(env); err != nil {
			return err
		}
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	rows, err := cl.Shares(ctx)
	if err != nil {
		return err
	}
	rows = filterShares(rows, o.list("accounts"), o.list("users"), o.has("all"), me)
	if o.has("json") {
		return writeJSON(env, rows)
	}
	return display.Shares(env.stdout, rows, display.ShareOptions{Long: o.has("long"), NoHeader: o.has("noheader")})
}

// filterShares keeps what sshare shows: every account line (only those of
// accounts, when given) and the user lines of users, or of every user with
// all, or else only the caller's (me).
func filterShares(rows []api.ShareRow, accounts, users []string, all bool, me string) []api.ShareRow {
	var out []api.ShareRow
	for _, r := range rows {
		if len(accounts) > 0 && !slices.Contains(accounts, r.Account) {
			continue
		}
		if r.User != "" {
			switch {
			case len(users) > 0:
				if !slices.Contains(users, r.User) {
					continue
				}
			case !all && r.User != me:
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func runWhy(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "why", getopt.Permute, args, flag(0, "json", "print the explanation as JSON"))
	if err != nil {
		return err
	}
	if len(o.args) != 1 {
		return fmt.Errorf("why: give one job id, e.g. corral why 12 or corral why 12_5")
	}
	if _, err := api.ParseJobRef(o.args[0]); err != nil {
		return fmt.Errorf("why: %w", err)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	why, err := cl.Why(ctx, o.args[0])
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, why)
	}
	return display.Why(env.stdout, why)
}
