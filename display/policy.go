package display

import (
	"io"
	"sort"
	"strconv"
	"strings"

	"corral/api"
)

// configValues reads each `corral config set` setting back out of a
// SchedConfig; package api has setters only. Durations are in seconds,
// which `config set` accepts back.
var configValues = map[string]func(c *api.SchedConfig) string{
	"PriorityWeightAge":       func(c *api.SchedConfig) string { return itoa64(c.Weights.Age) },
	"PriorityWeightFairshare": func(c *api.SchedConfig) string { return itoa64(c.Weights.Fairshare) },
	"PriorityWeightQOS":       func(c *api.SchedConfig) string { return itoa64(c.Weights.QOS) },
	"PriorityWeightPartition": func(c *api.SchedConfig) string { return itoa64(c.Weights.Partition) },
	"PriorityWeightJobSize":   func(c *api.SchedConfig) string { return itoa64(c.Weights.JobSize) },
	"PriorityWeightSite":      func(c *api.SchedConfig) string { return itoa64(c.Weights.Site) },
	"PriorityMaxAge":          func(c *api.SchedConfig) string { return itoa64(c.PriorityMaxAge) },
	"PriorityDecayHalfLife":   func(c *api.SchedConfig) string { return itoa64(c.DecayHalfLife) },
	"FairshareAlgorithm":      func(c *api.SchedConfig) string { return c.Fairshare },
	"BillingWeightCPU":        func(c *api.SchedConfig) string { return ftoa(c.BillingCPU) },
	"BillingWeightMem":        func(c *api.SchedConfig) string { return ftoa(c.BillingMem) },
	"BillingWeightGPU":        func(c *api.SchedConfig) string { return ftoa(c.BillingGPU) },
	"TRESBillingWeights":      func(c *api.SchedConfig) string { return c.TRESBillingWeights() },
	"AccountingRetention":     func(c *api.SchedConfig) string { return itoa64(c.AccountingRetention) },
	"MinJobAge":               func(c *api.SchedConfig) string { return itoa64(c.MinJobAge) },
	"RequestIDRetention":      func(c *api.SchedConfig) string { return itoa64(c.RequestIDRetention) },
	"MigrationDowntime":       func(c *api.SchedConfig) string { return itoa64(c.MigrationDowntimeMS) },
	"MigrationBandwidth":      func(c *api.SchedConfig) string { return itoa64(c.MigrationBandwidthMiB) },
	"MigrationMaxTime":        func(c *api.SchedConfig) string { return itoa64(c.MigrationMaxTimeS) },
	"DefMemPerCPU":            func(c *api.SchedConfig) string { return itoa64(c.DefMemPerCPU) },
	"SchedulerPolicy":         func(c *api.SchedConfig) string { return c.SchedulerPolicy },
	"PrivateData": func(c *api.SchedConfig) string {
		if c.PrivateData == "" {
			return "none"
		}
		return c.PrivateData
	},
	"ClusterName": func(c *api.SchedConfig) string { return noneIfEmpty(c.ClusterName) },
	"MailProg": func(c *api.SchedConfig) string {
		if c.MailProg == "" {
			return "default"
		}
		return c.MailProg
	},
	"MailWebhook": func(c *api.SchedConfig) string { return noneIfEmpty(c.MailWebhook) },
	"MailDomain":  func(c *api.SchedConfig) string { return noneIfEmpty(c.MailDomain) },
	"Licenses": func(c *api.SchedConfig) string {
		if len(c.Licenses) == 0 {
			return "none"
		}
		return api.FormatLicenses(c.Licenses)
	},
}

func noneIfEmpty(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
func secsOrBlank(v int64) string {
	if v <= 0 {
		return ""
	}
	return string(appendLongSecs(nil, v))
}

// Config renders `corral config show`: one Name=Value line per setting
// api.ConfigKeys lists, in its order. A setting this build cannot read
// (the server knows a newer one) prints as Name=? so it is not hidden.
func Config(w io.Writer, c *api.SchedConfig) error {
	var b strings.Builder
	for _, k := range api.ConfigKeys() {
		v := "?"
		if get, ok := configValues[k]; ok {
			v = get(c)
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// QOSList renders `corral qos list` in sacctmgr show qos's layout and
// column widths, in the order given. Columns widen to their longest value
// instead of cutting it, since an administrator reads every name. Times are
// sacctmgr's [D-]HH:MM:SS, and an unset limit (0) is blank. PreemptMode
// shows the mode in force: cancel when the QoS names none. PreemptFallback,
// corral's own, comes last so that sacctmgr's columns keep their places.
func QOSList(w io.Writer, qos []api.QOS) error {
	fields := []field{
		{"Name", 10, false}, {"Priority", 10, false}, {"Preempt", 10, false}, {"PreemptMode", 11, false},
		{"PreemptExemptTime", 19, false}, {"MaxWall", 11, false}, {"MaxJobsPU", 9, false},
		{"MaxSubmitPU", 11, false}, {"GrpCPUs", 8, false}, {"PreemptFallback", 15, false},
	}
	rows := make([][]string, 0, len(qos))
	for _, q := range qos {
		mode := string(q.PreemptMode)
		if mode == "" {
			mode = string(api.PreemptCancel)
		}
		// The fallback in force where it can apply: a QoS that migrates
		// its victims (cancel when it names none), or one that names a
		// fallback for a partition that does.
		fallback := string(q.PreemptFallback)
		if fallback == "" && q.PreemptMode == api.PreemptMigrate {
			fallback = string(api.PreemptCancel)
		}
		rows = append(rows, []string{
			q.Name, itoa64(q.Priority), strings.Join(q.Preempt, ","), mode,
			secsOrBlank(q.PreemptExemptTime), secsOrBlank(q.MaxWall),
			limitOrBlank(q.MaxJobsPerUser), limitOrBlank(q.MaxSubmitPerUser), limitOrBlank(q.GrpCPUs), fallback,
		})
	}
	fitWidths(fields, rows)
	t := &fieldsTable{fields: fields}
	t.header()
	for _, r := range rows {
		t.row(r...)
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

func limitOrBlank(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Accounts renders `corral account list` as sacctmgr's tree: each account
// indented one space deeper than its parent (the root's accounts not at
// all), with its parent and shares, and under it first its users (the
// account's name, one space deeper, with the User column filled), then its
// sub-accounts, each by name. Accounts the walk from the root does not
// reach (a missing parent) and users of unknown accounts are listed last,
// so that nothing the server holds is hidden.
func Accounts(w io.Writer, accounts []api.Account, users []api.AccountUser) error {
	sorted := append([]api.Account(nil), accounts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	children := map[string][]api.Account{}
	for _, a := range sorted {
		children[parentOf(a)] = append(children[parentOf(a)], a)
	}
	usersOf := map[string][]api.AccountUser{}
	for _, u := range users {
		usersOf[u.Account] = append(usersOf[u.Account], u)
	}
	for _, list := range usersOf {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	var rows [][]string
	seen := map[string]bool{}
	var walk func(a api.Account, depth int)
	walk = func(a api.Account, depth int) {
		if seen[a.Name] {
			return
		}
		seen[a.Name] = true
		rows = append(rows, []string{strings.Repeat(" ", depth) + a.Name, parentOf(a), "", formatShares(a.Shares)})
		for _, u := range usersOf[a.Name] {
			rows = append(rows, []string{strings.Repeat(" ", depth+1) + a.Name, "", u.Name, formatShares(u.Shares)})
		}
		for _, c := range children[a.Name] {
			walk(c, depth+1)
		}
	}
	for _, a := range children["root"] {
		walk(a, 0)
	}
	for _, a := range sorted {
		walk(a, 0)
	}
	for _, u := range users {
		if !seen[u.Account] {
			rows = append(rows, []string{" " + u.Account, "", u.Name, formatShares(u.Shares)})
		}
	}
	fields := []field{{"Account", -20, false}, {"Parent", -10, false}, {"User", 10, false}, {"Shares", 9, false}}
	fitWidths(fields, rows)
	t := &fieldsTable{fields: fields}
	t.header()
	for _, r := range rows {
		t.row(r...)
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

func parentOf(a api.Account) string {
	if a.Parent == "" {
		return "root"
	}
	return a.Parent
}

// Why renders `corral why`: the server's explanation, one sentence a line.
func Why(w io.Writer, why *api.Why) error {
	var b strings.Builder
	for _, line := range why.Lines {
		b.WriteString(Safe(line))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
