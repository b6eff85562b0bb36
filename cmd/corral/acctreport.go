package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/internal/getopt"
	"corral/submit"
)

// runAcctReport is corral acct report, the reports of Slurm's sreport:
// `account` (sreport cluster AccountUtilizationByUser: each account's
// total, then its users) and `users` (sreport user TopUsage: users by CPU
// time, most first), which sum the runs that ended in the window from the
// controllers' day sums; and `cluster [utilization]` (sreport cluster
// Utilization: the nodes' time, allocated, down, planned down, planned and
// idle). --svg FILE also draws the window's usage by account over time and
// the jobs' waits (acctsvg.go).
func runAcctReport(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "acct report", getopt.Permute, args,
		valued('S', "starttime", "TIME", "the window's start (default: midnight yesterday); sacct's time forms"),
		valued('E', "endtime", "TIME", "the window's end (default: midnight today)"),
		valued('t', "time", "UNIT", "report CPU and GPU time in Minutes (the default), Hours or Seconds, as sreport -t"),
		valued('T', "tres", "LIST", "cluster: the TRES to report, cpu (the default), gres/gpu or both (cpu,gres/gpu), as sreport -T; --svg: the first one's usage is drawn (billing draws billing)"),
		valued(0, "top", "N", "with users: the N users of most CPU time (default 10)"),
		valued(0, "svg", "FILE", "also draw the window's usage by account over time and the jobs' waits into FILE (SVG)"),
		flag('P', "parsable2", "fields separated by |, no trailing |"),
		flag('n', "noheader", "no header lines"),
	)
	if err != nil {
		return err
	}
	kind, err := reportKind(o.args)
	if err != nil {
		return err
	}
	r, err := reportWindow(o, clusterName(env))
	if err != nil {
		return err
	}
	tres, err := reportTRES(o.get("tres"))
	if err != nil {
		return err
	}
	top := 10
	if v := o.get("top"); v != "" {
		if top, err = strconv.Atoi(v); err != nil || top < 1 {
			return fmt.Errorf("acct report: --top=%s: give a number of users, at least 1", v)
		}
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	var b strings.Builder
	switch kind {
	case "cluster":
		rows, err := cl.AccountingCluster(ctx, r.start, r.end)
		if err != nil {
			return err
		}
		r.utilization(&b, rows, tres, o.get("tres") != "")
	default:
		rows, err := cl.AccountingUsage(ctx, r.start, r.end)
		if err != nil {
			return err
		}
		if kind == "users" {
			r.users(&b, rows, top)
		} else {
			r.accounts(&b, rows)
		}
	}
	if _, err := fmt.Fprint(env.stdout, b.String()); err != nil {
		return err
	}
	if file := o.get("svg"); file != "" {
		return writeUsageSVG(ctx, cl, file, r.start, r.end, tres[0])
	}
	return nil
}

// reportKind reads the report's name: account, users or cluster
// [utilization].
func reportKind(args []string) (string, error) {
	kind := "account"
	if len(args) > 0 {
		kind = strings.ToLower(args[0])
	}
	switch {
	case kind == "cluster" && (len(args) == 1 || len(args) == 2 && strings.EqualFold(args[1], "utilization")):
		return kind, nil
	case (kind == "account" || kind == "users") && len(args) <= 1:
		return kind, nil
	}
	return "", fmt.Errorf("acct report: give account (each account's usage by user, sreport cluster AccountUtilizationByUser), users (sreport user TopUsage) or cluster [utilization] (sreport cluster Utilization), not %q", strings.Join(args, " "))
}

// reportWindow reads -S, -E and -t into a report's settings.
func reportWindow(o *optSet, cluster string) (usageReport, error) {
	now := time.Now()
	end := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	start := end.AddDate(0, 0, -1)
	var err error
	if v := o.get("starttime"); v != "" {
		if start, err = submit.ParseAcctTime("--starttime", v, now); err != nil {
			return usageReport{}, err
		}
	}
	if v := o.get("endtime"); v != "" {
		if end, err = submit.ParseAcctTime("--endtime", v, now); err != nil {
			return usageReport{}, err
		}
	}
	if !end.After(start) {
		return usageReport{}, fmt.Errorf("acct report: the window %s - %s is empty: give an --endtime after the --starttime", start.Format(time.DateTime), end.Format(time.DateTime))
	}
	unit, per, err := reportUnit(o.get("time"))
	if err != nil {
		return usageReport{}, err
	}
	return usageReport{start: start, end: end, unit: unit, per: per, parsable: o.has("parsable2"), noHeader: o.has("noheader"), cluster: cluster}, nil
}

// reportUnit reads sreport's -t: the unit's name as the header says it and
// the seconds in one.
func reportUnit(v string) (string, float64, error) {
	switch strings.ToLower(v) {
	case "", "minutes", "min", "m":
		return "Minutes", 60, nil
	case "hours", "hour", "h":
		return "Hours", 3600, nil
	case "seconds", "sec", "s":
		return "Seconds", 1, nil
	}
	return "", 0, fmt.Errorf("acct report: --time=%s: use Minutes, Hours or Seconds", v)
}

// usageReport writes a report's lines.
type usageReport struct {
	start, end         time.Time
	unit               string
	per                float64
	parsable, noHeader bool
	cluster            string
}

// header writes sreport's banner and the column names.
func (r usageReport) header(b *strings.Builder, title string, cols []string, widths []int) {
	r.banner(b, title, fmt.Sprintf(" (%d secs)", int64(r.end.Sub(r.start).Seconds())), "CPU")
	r.columns(b, cols, widths)
}

// banner writes sreport's lines above a report: its title and window
// (with after, e.g. the window's seconds) and its unit.
func (r usageReport) banner(b *strings.Builder, title, after, tres string) {
	if r.noHeader {
		return
	}
	rule := strings.Repeat("-", 80) + "\n"
	if !r.parsable {
		b.WriteString(rule)
	}
	fmt.Fprintf(b, "%s %s - %s%s\n", title, r.start.Format("2006-01-02T15:04:05"), r.end.Add(-time.Second).Format("2006-01-02T15:04:05"), after)
	fmt.Fprintf(b, "Usage reported in %s %s\n", tres, r.unit)
	if !r.parsable {
		b.WriteString(rule)
	}
}

// columns writes the column names and, in the table, their rules.
func (r usageReport) columns(b *strings.Builder, cols []string, widths []int) {
	if r.noHeader {
		return
	}
	r.line(b, cols, widths)
	if !r.parsable {
		dashes := make([]string, len(cols))
		for i, w := range widths {
			dashes[i] = strings.Repeat("-", w)
		}
		b.WriteString(strings.Join(dashes, " ") + "\n")
	}
}

// line writes one row: right-aligned in its widths, or |-separated.
func (r usageReport) line(b *strings.Builder, cells []string, widths []int) {
	if r.parsable {
		b.WriteString(strings.Join(cells, "|") + "\n")
		return
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		if len(c) > widths[i] {
			c = c[:widths[i]-1] + "+"
		}
		out[i] = fmt.Sprintf("%*s", widths[i], c)
	}
	b.WriteString(strings.Join(out, " ") + "\n")
}

// amounts are a row's used figures in the report's unit.
func (r usageReport) amounts(u api.AcctUsage) []string {
	return []string{
		strconv.FormatInt(int64(u.CPUSeconds/r.per+0.5), 10),
		strconv.FormatInt(int64(u.GPUSeconds/r.per+0.5), 10),
		strconv.FormatFloat(u.Billing, 'f', 0, 64),
		strconv.Itoa(u.Records),
	}
}

// accounts writes each account's total (Login empty), then its users, as
// sreport cluster AccountUtilizationByUser does.
func (r usageReport) accounts(b *strings.Builder, rows []api.AcctUsage) {
	cols := []string{"Cluster", "Account", "Login", "Used", "GPU", "Billing", "Runs"}
	widths := []int{9, 15, 9, 10, 10, 10, 8}
	r.header(b, "Cluster/Account/User Utilization", cols, widths)
	for i := 0; i < len(rows); {
		j := i
		var total api.AcctUsage
		for ; j < len(rows) && rows[j].Account == rows[i].Account; j++ {
			total.CPUSeconds += rows[j].CPUSeconds
			total.GPUSeconds += rows[j].GPUSeconds
			total.Billing += rows[j].Billing
			total.Records += rows[j].Records
		}
		r.line(b, append([]string{r.cluster, orNoAccount(rows[i].Account), ""}, r.amounts(total)...), widths)
		for _, u := range rows[i:j] {
			r.line(b, append([]string{r.cluster, orNoAccount(u.Account), u.User}, r.amounts(u)...), widths)
		}
		i = j
	}
}

// users writes the top users by CPU time over every account, as sreport
// user TopUsage does (a user's accounts joined).
func (r usageReport) users(b *strings.Builder, rows []api.AcctUsage, top int) {
	type userSum struct {
		api.AcctUsage
		accounts []string
	}
	byUser := map[string]*userSum{}
	for _, u := range rows {
		s := byUser[u.User]
		if s == nil {
			s = &userSum{AcctUsage: api.AcctUsage{User: u.User}}
			byUser[u.User] = s
		}
		s.CPUSeconds += u.CPUSeconds
		s.GPUSeconds += u.GPUSeconds
		s.Billing += u.Billing
		s.Records += u.Records
		s.accounts = append(s.accounts, orNoAccount(u.Account))
	}
	sums := make([]*userSum, 0, len(byUser))
	for _, s := range byUser {
		sums = append(sums, s)
	}
	slices.SortFunc(sums, func(a, b *userSum) int {
		if a.CPUSeconds != b.CPUSeconds {
			if a.CPUSeconds > b.CPUSeconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.User, b.User)
	})
	cols := []string{"Cluster", "Login", "Account", "Used", "GPU", "Billing", "Runs"}
	widths := []int{9, 9, 15, 10, 10, 10, 8}
	r.header(b, "Top "+strconv.Itoa(top)+" Users", cols, widths)
	for _, s := range sums[:min(top, len(sums))] {
		r.line(b, append([]string{r.cluster, s.User, strings.Join(s.accounts, ",")}, r.amounts(s.AcctUsage)...), widths)
	}
}

// orNoAccount names a job charged to no account as sreport would show it.
func orNoAccount(a string) string {
	if a == "" {
		return "(none)"
	}
	return a
}
