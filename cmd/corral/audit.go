package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"corral/api"
	"corral/internal/getopt"
)

// runAudit lists the audit records the caller may read, or verifies the
// chains (audit verify).
func runAudit(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "verify" {
		return auditVerify(ctx, env, args[1:])
	}
	o, err := parseOpts(env, "audit", getopt.Permute, args,
		valued(0, "tenant", "LIST", "only these tenants' records (\"\" is the cluster's own chain)"),
		valued('u', "user", "LIST", "only records of these users, nodes or members"),
		valued(0, "since", "TIME", "only records since TIME: 2026-12-01T10:00:00Z, or a duration back (1h, 30m)"),
		valued(0, "limit", "N", "the newest N records (default 1000)"),
		flag(0, "json", "print the records as JSON"),
	)
	if err != nil {
		return err
	}
	if err := noArgs(o, "audit"); err != nil {
		return err
	}
	f, err := auditFilter(o)
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	v, err := cl.Audit(ctx, f)
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, v.Records)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTENANT\tPRINCIPAL\tOP\tTARGET\tSTATUS\tREQUEST\tMESSAGE")
	for _, r := range v.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Time.Local().Format("2006-01-02T15:04:05"), orString(r.Tenant, "-"),
			r.Principal, r.Op, orString(r.Target, "-"), r.Status, r.RequestID, auditMessage(r.Message))
	}
	return tw.Flush()
}

// auditMessage is a refusal's text on one line, without its JSON frame.
func auditMessage(m string) string {
	if _, rest, ok := strings.Cut(m, `"error":"`); ok {
		m, _, _ = strings.Cut(rest, `"`)
	}
	return strings.Join(strings.Fields(m), " ")
}

func auditFilter(o *optSet) (api.AuditFilter, error) {
	f := api.AuditFilter{Tenants: o.list("tenant"), Users: o.list("user")}
	if v := o.get("since"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			return f, &optionError{"since", v, "give a time (2026-12-01T10:00:00Z) or a duration back (1h)", err}
		}
	}
	if v := o.get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, &optionError{"limit", v, "give a number of records ≥ 1", err}
		}
		f.Limit = n
	}
	return f, nil
}

// auditVerify checks the audit chains: those the controllers serve, or
// those in a copy of a member's data directory (--data).
func auditVerify(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "audit verify", getopt.Permute, args,
		valued(0, "data", "DIR", "verify a copy of a member's data directory instead of asking the controllers"))
	if err != nil {
		return err
	}
	if err := noArgs(o, "audit verify"); err != nil {
		return err
	}
	var records []api.AuditRecord
	var heads map[string]api.AuditHead
	var problems []error
	if dir := o.get("data"); dir != "" {
		var err error
		if records, heads, problems, err = readAuditStore(env, dir); err != nil {
			return err
		}
	} else {
		cl, err := env.client()
		if err != nil {
			return err
		}
		v, err := cl.Audit(ctx, api.AuditFilter{Limit: 1_000_000})
		if err != nil {
			return err
		}
		records, heads = v.Records, v.Heads
	}
	problems = append(problems, api.VerifyAudit(records, heads)...)
	for _, p := range problems {
		fmt.Fprintln(env.stderr, "audit:", p)
	}
	if len(problems) > 0 {
		return errors.New("audit verify: the audit trail was altered (see above)")
	}
	fmt.Fprintf(env.stdout, "audit: %d records in %d chains verify\n", len(records), len(heads))
	return nil
}
