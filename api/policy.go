package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PreemptMode is what happens to a job of a QoS when a job of a QoS allowed
// to preempt it needs its resources.
type PreemptMode string

// Preemption modes.
const (
	// PreemptCancel ends the victim as PREEMPTED.
	PreemptCancel PreemptMode = "cancel"
	// PreemptRequeue puts the victim back in the queue, PENDING, with its
	// original submit time.
	PreemptRequeue PreemptMode = "requeue"
	// PreemptSuspend pauses the victim's VM and lends its CPUs to the
	// preemptor (its memory stays held); it resumes when they are free.
	PreemptSuspend PreemptMode = "suspend"
	// PreemptMigrate moves the victim to another node with room, by live
	// migration; when no node has room the QoS's fallback mode applies
	// (QOS.PreemptFallback).
	PreemptMigrate PreemptMode = "migrate"
	// PreemptCheckpoint parks the victim in a checkpoint, freeing all it
	// holds; it is restored when room appears on a node that can read the
	// file.
	PreemptCheckpoint PreemptMode = "checkpoint"
)

// PreemptModes are the preemption modes, as users write them.
const PreemptModes = "cancel, requeue, suspend, migrate or checkpoint"

// ParsePreemptMode reads a preemption mode (PreemptModes).
func ParsePreemptMode(s string) (PreemptMode, error) {
	switch m := PreemptMode(strings.ToLower(s)); m {
	case PreemptCancel, PreemptRequeue, PreemptSuspend, PreemptMigrate, PreemptCheckpoint:
		return m, nil
	}
	return "", fmt.Errorf("preempt mode %q: use %s", s, PreemptModes)
}

// PreemptFallbacks are the modes a preemption by migration may fall back
// to, as users write them.
const PreemptFallbacks = "cancel, requeue, suspend or checkpoint"

// ParsePreemptFallback reads the mode that preempts a victim when a
// preemption by migration finds no node with room for it: any mode but
// migrate itself (PreemptFallbacks).
func ParsePreemptFallback(s string) (PreemptMode, error) {
	m, err := ParsePreemptMode(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("preempt fallback %q: use %s", s, PreemptFallbacks)
	case m == PreemptMigrate:
		return "", fmt.Errorf("preempt fallback %q: migrate cannot be its own fallback: use %s", s, PreemptFallbacks)
	}
	return m, nil
}

// QOS is a quality of service: a priority, what it may preempt, and limits.
// Zero limits are unlimited.
type QOS struct {
	Name     string `json:"name"`
	Priority int64  `json:"priority"`
	// Preempt lists the QoS whose jobs this one's jobs may preempt.
	Preempt []string `json:"preempt,omitempty"`
	// PreemptMode applies to this QoS's jobs when they are preempted.
	PreemptMode PreemptMode `json:"preempt_mode,omitempty"`
	// PreemptFallback applies to this QoS's jobs when they are to be
	// preempted by migration (their QoS's or their partition's mode) and
	// no node has room for them, or they cannot migrate: cancel (the
	// default), requeue, suspend or checkpoint.
	PreemptFallback PreemptMode `json:"preempt_fallback,omitempty"`
	// PreemptExemptTime protects a job that has run less than this long
	// (seconds).
	PreemptExemptTime int64 `json:"preempt_exempt_time_s,omitempty"`
	MaxWall           int64 `json:"max_wall_s,omitempty"`
	MaxJobsPerUser    int   `json:"max_jobs_per_user,omitempty"`
	MaxSubmitPerUser  int   `json:"max_submit_per_user,omitempty"`
	GrpCPUs           int   `json:"grp_cpus,omitempty"`
}

// DefaultQOS are the QoS every new cluster starts with.
func DefaultQOS() []QOS {
	return []QOS{
		{Name: "guaranteed", Priority: 1000, Preempt: []string{"besteffort"}, PreemptMode: PreemptCancel},
		{Name: "burstable", Priority: 500, PreemptMode: PreemptCancel},
		{Name: "besteffort", Priority: 0, PreemptMode: PreemptRequeue},
	}
}

// SlurmQOS are the QoS a Slurm cluster starts with: "normal", which no
// QoS preempts and which preempts none. A new corral cluster gets them
// beside DefaultQOS when it is seeded (so --qos=normal works as on any
// Slurm site).
func SlurmQOS() []QOS {
	return []QOS{{Name: "normal", Priority: 0, PreemptMode: PreemptCancel}}
}

// PriorityWeights are the multifactor priority's weights: a job's priority
// is the sum of weight × factor (each factor in [0,1]) less its nice value.
type PriorityWeights struct {
	Age       int64 `json:"age"`
	Fairshare int64 `json:"fairshare"`
	QOS       int64 `json:"qos"`
	Partition int64 `json:"partition"`
	JobSize   int64 `json:"job_size"`
	Site      int64 `json:"site"`
}

// SchedConfig is the scheduler's runtime configuration, changed through
// Raft with `corral config set`.
type SchedConfig struct {
	Weights PriorityWeights `json:"weights"`
	// PriorityMaxAge is when the age factor reaches 1 (seconds).
	PriorityMaxAge int64 `json:"priority_max_age_s"`
	// DecayHalfLife halves recorded usage (seconds; 0: no decay).
	DecayHalfLife int64 `json:"decay_half_life_s"`
	// Fairshare is the algorithm: "fairtree" (Slurm's default) or "classic".
	Fairshare string `json:"fairshare"`
	// Billing weights turn TRES-seconds into usage: per CPU-second, per
	// GiB-second of memory, per GPU-second.
	BillingCPU float64 `json:"billing_cpu"`
	BillingMem float64 `json:"billing_mem_gb"`
	BillingGPU float64 `json:"billing_gpu"`
	// MinJobAge is how long a finished job stays in the controllers'
	// state, and so in `corral queue -t all`, before it is purged
	// (seconds; Slurm's MinJobAge). 0 keeps finished jobs forever.
	MinJobAge int64 `json:"min_job_age_s"`
	// RequestIDRetention is how long a submission's request id is
	// remembered, so that a retry returns the original job (seconds). 0
	// remembers request ids forever.
	RequestIDRetention int64 `json:"request_id_retention_s"`
	// DefMemPerCPU is the memory (MiB) per CPU a job that asks for none
	// gets (Slurm's DefMemPerCPU).
	DefMemPerCPU int64 `json:"def_mem_per_cpu_mb"`
	// SchedulerPolicy is how a pass orders starts: easy (EASY backfill,
	// the default), conservative (a reservation for every waiting job) or
	// fcfs (first come, first served; no backfill).
	SchedulerPolicy string `json:"scheduler_policy"`
	// PrivateData hides more from users, as Slurm's PrivateData does
	// (with --auth): "jobs" shows a user only their own jobs (not their
	// tenant's), "usage" only their own usage; both, comma-separated.
	// Coordinators, operators and admins see what they always do.
	PrivateData string `json:"private_data,omitempty"`
	// Licenses are the cluster's licenses and their totals, Slurm's
	// Licenses=matlab:10,fluent:4 (see ParseLicenses); jobs ask for them
	// with sbatch -L.
	Licenses []License `json:"licenses,omitempty"`
	// AccountingRetention is how long the controllers keep a job's
	// accounting records after it ended (seconds; 0, the default, keeps
	// them forever). Records older go with the next purge of finished jobs.
	AccountingRetention int64 `json:"accounting_retention_s,omitempty"`
	// MigrationDowntime (milliseconds), MigrationBandwidth (MiB a second)
	// and MigrationMaxTime (seconds) bound a live migration's stream: the
	// longest the guest may stand still at the source's last pass, the
	// stream's rate, and its whole time before it is cancelled and the
	// job runs on at the source. 0 takes the defaults (50 ms, 8192 MiB/s,
	// 120 s; docs/migration.md).
	MigrationDowntimeMS   int64 `json:"migration_downtime_ms,omitempty"`
	MigrationBandwidthMiB int64 `json:"migration_bandwidth_mib,omitempty"`
	MigrationMaxTimeS     int64 `json:"migration_max_time_s,omitempty"`
	// MailProg is the program the leader runs for each job notification
	// (Slurm's MailProg, invoked as PROG -s SUBJECT RECIPIENT): "" is the
	// default, /usr/bin/mail where a controller has it, and "none" runs
	// none. MailWebhook is a URL the leader POSTs each notification to as
	// JSON ("" for none). MailDomain is added to a recipient without one
	// (Slurm's MailDomain). See docs/mail.md.
	MailProg string `json:"mail_prog,omitempty"`
	// ClusterName is the cluster's name (Slurm's ClusterName): sbatch -M
	// takes it, and --parsable then prints ID;NAME.
	ClusterName string `json:"cluster_name,omitempty"`
	MailWebhook string `json:"mail_webhook,omitempty"`
	MailDomain  string `json:"mail_domain,omitempty"`
}

// LicenseTotal returns the cluster's total of license name; 0 when it has
// none.
func (c SchedConfig) LicenseTotal(name string) int {
	for _, l := range c.Licenses {
		if l.Name == name {
			return l.Count
		}
	}
	return 0
}

// PrivateDataKinds are the values PrivateData lists.
var PrivateDataKinds = []string{"jobs", "usage"}

// Private reports whether PrivateData lists kind.
func (c SchedConfig) Private(kind string) bool {
	for _, k := range strings.Split(c.PrivateData, ",") {
		if k == kind {
			return true
		}
	}
	return false
}

// UnmarshalJSON reads a configuration, taking the default for every
// setting the JSON lacks: a snapshot or a server from before a setting
// existed means "as it was then", which is the default, not zero (for
// MinJobAge zero would mean "never purge").
func (c *SchedConfig) UnmarshalJSON(b []byte) error {
	type plain SchedConfig
	p := plain(DefaultSchedConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = SchedConfig(p)
	return nil
}

// DefaultSchedConfig is what a new cluster starts with: Slurm's usual
// weights, a 7-day max age and half-life, Fair Tree.
func DefaultSchedConfig() SchedConfig {
	return SchedConfig{
		Weights:        PriorityWeights{Age: 1000, Fairshare: 10000, QOS: 10000, Partition: 1000, JobSize: 1000},
		PriorityMaxAge: 7 * 24 * 3600,
		DecayHalfLife:  7 * 24 * 3600,
		Fairshare:      "fairtree",
		BillingCPU:     1,
		BillingMem:     0.25,
		BillingGPU:     10,

		MinJobAge:          300,
		RequestIDRetention: 24 * 3600,
		DefMemPerCPU:       512,
		SchedulerPolicy:    "easy",
	}
}

// SchedulerPolicies are the values SchedulerPolicy takes.
var SchedulerPolicies = []string{"easy", "conservative", "fcfs"}

// configKeys maps `corral config set` names (Slurm's where one exists) to
// the field they set.
var configKeys = map[string]func(c *SchedConfig, v string) error{
	"PriorityWeightAge":       intField(func(c *SchedConfig) *int64 { return &c.Weights.Age }),
	"PriorityWeightFairshare": intField(func(c *SchedConfig) *int64 { return &c.Weights.Fairshare }),
	"PriorityWeightQOS":       intField(func(c *SchedConfig) *int64 { return &c.Weights.QOS }),
	"PriorityWeightPartition": intField(func(c *SchedConfig) *int64 { return &c.Weights.Partition }),
	"PriorityWeightJobSize":   intField(func(c *SchedConfig) *int64 { return &c.Weights.JobSize }),
	"PriorityWeightSite":      intField(func(c *SchedConfig) *int64 { return &c.Weights.Site }),
	"PriorityMaxAge":          durField(func(c *SchedConfig) *int64 { return &c.PriorityMaxAge }),
	"PriorityDecayHalfLife":   durField(func(c *SchedConfig) *int64 { return &c.DecayHalfLife }),
	"FairshareAlgorithm": func(c *SchedConfig, v string) error {
		if v != "fairtree" && v != "classic" {
			return fmt.Errorf("FairshareAlgorithm=%s: use fairtree or classic", v)
		}
		c.Fairshare = v
		return nil
	},
	"BillingWeightCPU": floatField(func(c *SchedConfig) *float64 { return &c.BillingCPU }),
	"BillingWeightMem": floatField(func(c *SchedConfig) *float64 { return &c.BillingMem }),
	"BillingWeightGPU": floatField(func(c *SchedConfig) *float64 { return &c.BillingGPU }),
	"MinJobAge":        durField(func(c *SchedConfig) *int64 { return &c.MinJobAge }),
	"DefMemPerCPU": func(c *SchedConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<30 {
			return fmt.Errorf("DefMemPerCPU=%s: give MiB, a whole number from 1 to %d", v, 1<<30)
		}
		c.DefMemPerCPU = n
		return nil
	},
	"SchedulerPolicy": func(c *SchedConfig, v string) error {
		v = strings.ToLower(v)
		if v == "none" {
			v = "fcfs"
		}
		for _, p := range SchedulerPolicies {
			if v == p {
				c.SchedulerPolicy = v
				return nil
			}
		}
		return fmt.Errorf("SchedulerPolicy=%s: use easy, conservative or fcfs", v)
	},
	"RequestIDRetention": durField(func(c *SchedConfig) *int64 { return &c.RequestIDRetention }),
	"MigrationDowntime":  msField(func(c *SchedConfig) *int64 { return &c.MigrationDowntimeMS }),
	"MigrationBandwidth": func(c *SchedConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<20 {
			return fmt.Errorf("MigrationBandwidth=%s: give MiB a second, a whole number up to %d (0: the default)", v, 1<<20)
		}
		c.MigrationBandwidthMiB = n
		return nil
	},
	"MigrationMaxTime": durField(func(c *SchedConfig) *int64 { return &c.MigrationMaxTimeS }),
	"Licenses": func(c *SchedConfig, v string) error {
		if v == "" || strings.EqualFold(v, "none") {
			c.Licenses = nil
			return nil
		}
		ls, err := ParseLicenses(v)
		if err != nil {
			return fmt.Errorf("Licenses=%s: %w", v, err)
		}
		c.Licenses = ls
		return nil
	},
	"PrivateData": func(c *SchedConfig, v string) error {
		var kinds []string
		for _, k := range strings.Split(strings.ToLower(v), ",") {
			switch {
			case k == "" || k == "none":
			case k != "jobs" && k != "usage":
				return fmt.Errorf("PrivateData=%s: list jobs, usage, or none", v)
			case !slices.Contains(kinds, k):
				kinds = append(kinds, k)
			}
		}
		slices.Sort(kinds)
		c.PrivateData = strings.Join(kinds, ",")
		return nil
	},
}

// ConfigKeys lists the names `corral config set` accepts, sorted.
func ConfigKeys() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// Set changes one setting by name (case-insensitive), e.g.
// Set("PriorityWeightFairshare", "5000").
func (c *SchedConfig) Set(key, value string) error {
	for k, f := range configKeys {
		if strings.EqualFold(k, key) {
			return f(c, value)
		}
	}
	return fmt.Errorf("unknown setting %q (settings: %s)", key, strings.Join(ConfigKeys(), ", "))
}

// Bounds of the settings, so that a priority (a sum of weights × factors)
// stays exact in an int64 and a duration converts to a time.Duration.
const (
	// MaxWeight is the largest priority weight (Slurm's are 32-bit).
	MaxWeight = math.MaxUint32
	// MaxBillingWeight bounds a billing weight.
	MaxBillingWeight = 1e9
	// MaxDurationSetting is the longest duration setting: 100 years, in
	// seconds.
	MaxDurationSetting = 100 * 365 * 24 * 3600
)

func intField(get func(*SchedConfig) *int64) func(*SchedConfig, string) error {
	return func(c *SchedConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > MaxWeight {
			return fmt.Errorf("%q is not a whole number from 0 to %d", v, int64(MaxWeight))
		}
		*get(c) = n
		return nil
	}
}

func floatField(get func(*SchedConfig) *float64) func(*SchedConfig, string) error {
	return func(c *SchedConfig, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(n) || n < 0 || n > MaxBillingWeight {
			return fmt.Errorf("%q is not a number from 0 to %g", v, float64(MaxBillingWeight))
		}
		*get(c) = n
		return nil
	}
}

// durField reads seconds, or a Go duration such as 168h.
func durField(get func(*SchedConfig) *int64) func(*SchedConfig, string) error {
	return func(c *SchedConfig, v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			if n > MaxDurationSetting {
				return fmt.Errorf("%q is more than %d seconds (100 years)", v, MaxDurationSetting)
			}
			*get(c) = n
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%q is neither seconds nor a duration such as 168h", v)
		}
		if d > MaxDurationSetting*time.Second {
			return fmt.Errorf("%q is more than 100 years", v)
		}
		*get(c) = int64(d / time.Second)
		return nil
	}
}

// msField reads milliseconds, or a Go duration such as 50ms, up to an hour.
func msField(get func(*SchedConfig) *int64) func(*SchedConfig, string) error {
	return func(c *SchedConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d, derr := time.ParseDuration(v)
			if derr != nil {
				return fmt.Errorf("%q is neither milliseconds nor a duration such as 50ms", v)
			}
			n = d.Milliseconds()
		}
		if n < 0 || n > 3600*1000 {
			return fmt.Errorf("%q is not between 0 and an hour", v)
		}
		*get(c) = n
		return nil
	}
}

// Account is a node of the fair-share tree: a tenant (Parent "root") or an
// account under one.
type Account struct {
	Name   string  `json:"name"`
	Parent string  `json:"parent"`
	Shares float64 `json:"shares"`
}

// AccountUser places a user in an account with shares.
type AccountUser struct {
	Name    string  `json:"name"`
	Account string  `json:"account"`
	Shares  float64 `json:"shares"`
}

// PolicyView is the scheduler's configuration, QoS, accounts and users.
type PolicyView struct {
	Config   SchedConfig   `json:"config"`
	QOS      []QOS         `json:"qos"`
	Accounts []Account     `json:"accounts"`
	Users    []AccountUser `json:"users"`
}

// ConfigRequest changes settings by name.
type ConfigRequest struct {
	Settings [][2]string `json:"settings"`
}

// QOSRequest adds, replaces or deletes a QoS.
type QOSRequest struct {
	QOS    QOS  `json:"qos"`
	Delete bool `json:"delete,omitempty"`
}

// AccountRequest adds, replaces or deletes an account.
type AccountRequest struct {
	Account Account `json:"account"`
	Delete  bool    `json:"delete,omitempty"`
}

// UserRequest adds, replaces or deletes a user's association.
type UserRequest struct {
	User   AccountUser `json:"user"`
	Delete bool        `json:"delete,omitempty"`
}

// PriorityRow is one pending job's priority and factors (sprio).
type PriorityRow struct {
	JobID     uint64  `json:"job_id"`
	Ref       string  `json:"ref"`
	User      string  `json:"user"`
	Account   string  `json:"account"`
	QOS       string  `json:"qos"`
	Partition string  `json:"partition"`
	Priority  int64   `json:"priority"`
	Age       float64 `json:"age"`
	Fairshare float64 `json:"fairshare"`
	QOSF      float64 `json:"qos_factor"`
	PartF     float64 `json:"partition_factor"`
	JobSize   float64 `json:"job_size"`
	Site      float64 `json:"site"`
	Nice      int     `json:"nice"`
	// Weights used, so a client can print weighted values as sprio does.
	Weights PriorityWeights `json:"weights"`
}

// ShareRow is one line of sshare.
type ShareRow struct {
	Account      string  `json:"account"`
	User         string  `json:"user,omitempty"`
	Depth        int     `json:"depth"`
	RawShares    float64 `json:"raw_shares"`
	NormShares   float64 `json:"norm_shares"`
	RawUsage     float64 `json:"raw_usage"`
	EffectvUsage float64 `json:"effectv_usage"`
	LevelFS      float64 `json:"level_fs"`
	// LevelFSInf is set when LevelFS is infinite (shares but no usage).
	LevelFSInf bool    `json:"level_fs_inf,omitempty"`
	FairShare  float64 `json:"fairshare"`
}

// Why explains a job's state in plain words (corral why).
type Why struct {
	JobID uint64   `json:"job_id"`
	Ref   string   `json:"ref"`
	State JobState `json:"state"`
	Lines []string `json:"lines"`
}

// UpdateJobRequest changes a job, as scontrol update JobId=... does.
// Without Changes it sets a pending job's dependency (a nil Dependency
// removes it), as it always did; with Changes it makes those changes, and
// touches the dependency only when Changes.SetDependency says so.
type UpdateJobRequest struct {
	ID         uint64      `json:"id"`
	Dependency *Dependency `json:"dependency"`
	Changes    *JobChanges `json:"changes,omitempty"`
}

// JobChanges are the fields of a job an update may change; nil ones stay.
// TimeLimit, Name and Comment change at any time before the job ends;
// the others only while it is pending. Raising a time limit beyond what
// the job's QoS (MaxWall) and partition (MaxTime) allow, or lowering a
// nice value, takes an operator or administrator.
type JobChanges struct {
	TimeLimit *int64  `json:"time_limit_s,omitempty"`
	Name      *string `json:"name,omitempty"`
	Comment   *string `json:"comment,omitempty"`
	Nice      *int    `json:"nice,omitempty"`
	Partition *string `json:"partition,omitempty"`
	QOS       *string `json:"qos,omitempty"`
	// NumTasks sets --ntasks; NumCPUs the job's CPUs in all (a multiple of
	// its tasks: the CPUs per task follow).
	NumTasks *int `json:"num_tasks,omitempty"`
	NumCPUs  *int `json:"num_cpus,omitempty"`
	// MinMemoryNode is --mem in MiB (it replaces --mem-per-cpu).
	MinMemoryNode *int64 `json:"min_memory_node_mb,omitempty"`
	// MinTmpDiskNode is --tmp in MiB: the node-local scratch space the
	// job holds.
	MinTmpDiskNode *int64 `json:"min_tmp_disk_node_mb,omitempty"`
	// StartTime is --begin.
	StartTime *time.Time `json:"start_time,omitempty"`
	// ArrayTaskThrottle is an array's %N: how many of its tasks may run at
	// once (0: no limit).
	ArrayTaskThrottle *int `json:"array_task_throttle,omitempty"`
	// SetDependency sets the dependency to UpdateJobRequest.Dependency.
	SetDependency bool `json:"set_dependency,omitempty"`
}
