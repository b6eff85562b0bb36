package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
	"corral/submit"
)

// runAcct is `corral acct`, and sacct: the accounting records of finished
// runs, from whichever controller answers (every member keeps them).
func runAcct(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "export" {
		return runAcctExport(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "report" {
		return runAcctReport(ctx, env, args[1:])
	}
	o, err := parseOpts(env, "acct", getopt.Permute, args,
		valued('j', "jobs", "IDS", "only these jobs (12, 12_3 for an array task); the default window becomes all time"),
		valued('u', "user", "USERS", "only these users' jobs (default: your own)"),
		valued(0, "uid", "USERS", "the same as --user"),
		valued('A', "accounts", "ACCOUNTS", "only jobs charged to these accounts"),
		flag('a', "allusers", "every user's jobs (those you may see)"),
		valued('S', "starttime", "TIME", "jobs that ran at or after TIME (default: midnight today); HH:MM, MM/DD[/YY], YYYY-MM-DD[THH:MM[:SS]], now-2days ..."),
		valued('E', "endtime", "TIME", "jobs that ran at or before TIME (default: now)"),
		valued('s', "state", "STATES", "only jobs that ended in these states, e.g. CD,F,TO"),
		flag('X', "allocations", "only the jobs' lines, not their batch steps"),
		flag('D', "duplicates", "every run of a requeued job, not only its last"),
		valued('o', "format", "FIELDS", "the fields to print, e.g. JobID,JobName%30,State (see --helpformat)"),
		flag('e', "helpformat", "list the fields --format takes"),
		flag('b', "brief", "print JobID, State and ExitCode only"),
		flag('P', "parsable2", "fields separated by |, no trailing |"),
		flag('p', "parsable", "fields separated by |, with a trailing |"),
		flag('n', "noheader", "no header line"),
		flag(0, "json", "print the records as JSON (sacct --json)"),
		valued('M', "clusters", "NAMES", "accepted for compatibility: this cluster answers"),
		flag('L', "allclusters", "accepted for compatibility: this cluster answers"),
	)
	if err != nil {
		return err
	}
	if o.has("helpformat") {
		_, err := fmt.Fprintln(env.stdout, strings.Join(display.AcctFieldNames(), " "))
		return err
	}
	q, tasks, err := acctQuery(o, time.Now())
	if err != nil {
		return err
	}
	format := display.AcctDefaultFormat
	switch {
	case o.has("format"):
		format = strings.Join(o.all["format"], ",")
	case o.has("brief"):
		format = "JobID,State,ExitCode"
	}
	cols, err := display.ParseAcctFormat(format)
	if err != nil {
		return err
	}
	recs, err := fetchRecords(ctx, env, q, tasks)
	if err != nil {
		return err
	}
	denv := display.AcctEnv{Loc: time.Local, Cluster: clusterName(env), UID: lookupUser()}
	if o.has("json") {
		return display.AcctJSON(env.stdout, recs, denv)
	}
	layout := display.AcctLayout{Parsable: o.has("parsable"), Parsable2: o.has("parsable2"), NoHeader: o.has("noheader")}
	return display.Acct(env.stdout, display.AcctLines(recs, o.has("allocations")), cols, layout, denv)
}

// acctQuery turns sacct's options into the controllers' query, with the
// array tasks -j named (their records are found by array, then kept by
// keepTasks).
func acctQuery(o *optSet, now time.Time) (api.AcctQuery, []api.TaskRef, error) {
	ids, tasks, err := parseJobRefs(o.list("jobs"))
	if err != nil {
		return api.AcctQuery{}, nil, fmt.Errorf("--jobs: %w", err)
	}
	q := api.AcctQuery{Jobs: ids, Accounts: o.list("accounts"), AllUsers: o.has("allusers"), Duplicates: o.has("duplicates")}
	for _, t := range tasks {
		if !slices.Contains(q.Jobs, t.Array) {
			q.Jobs = append(q.Jobs, t.Array)
		}
	}
	q.Users = append(o.list("user"), o.list("uid")...)
	for i, u := range q.Users {
		if n, err := strconv.Atoi(u); err == nil {
			if found, err := user.LookupId(strconv.Itoa(n)); err == nil {
				q.Users[i] = found.Username
			}
		}
	}
	if q.States, err = parseStates(o.list("state")); err != nil {
		return q, nil, fmt.Errorf("--state: %w", err)
	}
	switch {
	case o.has("starttime"):
		if q.Start, err = submit.ParseAcctTime("--starttime", o.get("starttime"), now); err != nil {
			return q, nil, err
		}
	case len(q.Jobs) == 0:
		q.Start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	}
	if o.has("endtime") {
		if q.End, err = submit.ParseAcctTime("--endtime", o.get("endtime"), now); err != nil {
			return q, nil, err
		}
		if !q.Start.IsZero() && q.End.Before(q.Start) {
			return q, nil, fmt.Errorf("--endtime %s is before --starttime %s: give a window that ends after it starts",
				q.End.Format(time.DateTime), q.Start.Format(time.DateTime))
		}
	}
	return q, tasks, nil
}

// fetchRecords asks the controllers for the records q selects, keeping of
// the arrays -j named by some tasks only those tasks' (keepTasks).
func fetchRecords(ctx context.Context, env *cliEnv, q api.AcctQuery, tasks []api.TaskRef) ([]api.AcctRecord, error) {
	cl, err := env.client()
	if err != nil {
		return nil, err
	}
	recs, err := cl.Accounting(ctx, q)
	if err != nil {
		return nil, err
	}
	return keepTasks(recs, q.Jobs, tasks), nil
}

// keepTasks drops the records of arrays -j named only by some of their
// tasks (12_3) but those tasks': an array named whole (12) keeps all.
func keepTasks(recs []api.AcctRecord, ids []uint64, tasks []api.TaskRef) []api.AcctRecord {
	if len(tasks) == 0 {
		return recs
	}
	return slices.DeleteFunc(recs, func(r api.AcctRecord) bool {
		if r.ArrayJobID == 0 || slices.Contains(ids, r.ArrayJobID) || slices.Contains(ids, r.JobID) {
			return false
		}
		return !slices.ContainsFunc(tasks, func(t api.TaskRef) bool { return t.Array == r.ArrayJobID && t.Task == r.ArrayTaskID })
	})
}

// clusterName is the name sacct's Cluster field shows: CORRAL_CLUSTER, or
// "corral".
func clusterName(env *cliEnv) string {
	if n := env.getenv("CORRAL_CLUSTER"); n != "" {
		return n
	}
	return "corral"
}

// lookupUser resolves users' numeric ids and primary groups on this host,
// once each, for the UID, GID and Group fields.
func lookupUser() func(name string) (uid, gid int, group string, ok bool) {
	type ids struct {
		uid, gid int
		group    string
		ok       bool
	}
	cache := map[string]ids{}
	return func(name string) (int, int, string, bool) {
		if c, seen := cache[name]; seen {
			return c.uid, c.gid, c.group, c.ok
		}
		var c ids
		if u, err := user.Lookup(name); err == nil {
			c.uid, _ = strconv.Atoi(u.Uid)
			c.gid, _ = strconv.Atoi(u.Gid)
			c.group, c.ok = u.Gid, true
			if g, err := user.LookupGroupId(u.Gid); err == nil {
				c.group = g.Name
			}
		}
		cache[name] = c
		return c.uid, c.gid, c.group, c.ok
	}
}

// runAcctExport is `corral acct export`: the records the query selects
// (sacct's -j -u -A -a -S -E -s, and --tenant) written to a file as CSV,
// NDJSON or Parquet (accounting's export schemas), or one file per tenant
// with --per-tenant.
func runAcctExport(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "acct export", getopt.Permute, args,
		valued(0, "format", "FORMAT", "csv, ndjson or parquet"),
		valued('o', "output", "FILE", "the file to write (- for standard output)"),
		valued(0, "tenant", "TENANTS", "only these tenants' records"),
		flag(0, "per-tenant", "one file per tenant: FILE with -TENANT before its extension"),
		valued('j', "jobs", "IDS", "only these jobs"),
		valued('u', "user", "USERS", "only these users' jobs (default: your own)"),
		valued('A', "accounts", "ACCOUNTS", "only jobs charged to these accounts"),
		flag('a', "allusers", "every user's jobs (those you may see)"),
		valued('S', "starttime", "TIME", "jobs that ran at or after TIME (default: midnight today)"),
		valued('E', "endtime", "TIME", "jobs that ran at or before TIME (default: now)"),
		valued('s', "state", "STATES", "only jobs that ended in these states"),
		flag('D', "duplicates", "every run of a requeued job, not only its last"),
	)
	if err != nil {
		return err
	}
	write, err := exportWriter(env, o.get("format"))
	if err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("acct export: --format %q: give csv, ndjson or parquet", display.Safe(o.get("format")))
	}
	out := o.get("output")
	if out == "" {
		return fmt.Errorf("acct export: give the file to write with -o FILE (- for standard output)")
	}
	q, tasks, err := acctQuery(o, time.Now())
	if err != nil {
		return err
	}
	q.Tenants = o.list("tenant")
	if !o.has("per-tenant") && len(tasks) == 0 {
		return streamExport(ctx, env, q, o.get("format"), out)
	}
	recs, err := fetchRecords(ctx, env, q, tasks)
	if err != nil {
		return err
	}
	if !o.has("per-tenant") {
		return writeExport(env, out, recs, write)
	}
	if out == "-" {
		return fmt.Errorf("acct export: --per-tenant writes one file per tenant; give -o FILE, not -")
	}
	byTenant := map[string][]api.AcctRecord{}
	for _, r := range recs {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
	}
	ext := filepath.Ext(out)
	for _, t := range slices.Sorted(maps.Keys(byTenant)) {
		name := t
		if name == "" {
			name = "none"
		}
		if err := writeExport(env, strings.TrimSuffix(out, ext)+"-"+name+ext, byTenant[t], write); err != nil {
			return err
		}
	}
	return nil
}

// streamExport has the controller write the export, and copies it to
// path (standard output for -) as it comes: a year's records are never in
// memory, here or there. A cut transfer leaves no file behind.
func streamExport(ctx context.Context, env *cliEnv, q api.AcctQuery, format, path string) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	if path == "-" {
		_, err := cl.AccountingExport(ctx, q, format, env.stdout)
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("acct export: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	n, err := cl.AccountingExport(ctx, q, format, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("acct export: writing %s: %w", path, err)
	}
	fmt.Fprintf(env.stderr, "%s: %d records\n", path, n)
	return nil
}

// writeExport writes recs to path (standard output for -) with write.
func writeExport(env *cliEnv, path string, recs []api.AcctRecord, write func(io.Writer, []api.AcctRecord) error) error {
	if path == "-" {
		return write(env.stdout, recs)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("acct export: %w", err)
	}
	if err := write(f, recs); err != nil {
		f.Close()
		return fmt.Errorf("acct export: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("acct export: writing %s: %w", path, err)
	}
	fmt.Fprintf(env.stderr, "%s: %d records\n", path, len(recs))
	return nil
}
