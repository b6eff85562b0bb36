package display

import (
	"reflect"
	"strings"
	"testing"

	"corral/api"
)

func TestConfig(t *testing.T) {
	c := api.DefaultSchedConfig()
	c.Weights.Site = 7
	c.BillingMem = 0.125
	var b strings.Builder
	if err := Config(&b, &c); err != nil {
		t.Fatal(err)
	}
	want := `AccountingRetention=0
BillingWeightCPU=1
BillingWeightGPU=10
BillingWeightMem=0.125
ClusterName=none
DefMemPerCPU=512
FairshareAlgorithm=fairtree
Licenses=none
MailDomain=none
MailProg=default
MailWebhook=none
MigrationBandwidth=0
MigrationDowntime=0
MigrationMaxTime=0
MinJobAge=300
PriorityDecayHalfLife=604800
PriorityMaxAge=604800
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightQOS=10000
PriorityWeightSite=7
PrivateData=none
RequestIDRetention=86400
SchedulerPolicy=easy
TRESBillingWeights=CPU=1,Mem=0.125G,GRES/gpu=10
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestConfigReadsEverySetting fails when package api gains a setting that
// Config cannot print: add it to configValues.
func TestConfigReadsEverySetting(t *testing.T) {
	for _, k := range api.ConfigKeys() {
		if configValues[k] == nil {
			t.Errorf("setting %s has no entry in configValues", k)
		}
	}
	if len(configValues) != len(api.ConfigKeys()) {
		t.Errorf("configValues has %d entries, api.ConfigKeys %d", len(configValues), len(api.ConfigKeys()))
	}
}

// TestConfigRoundTrip sets every setting to what Config printed and expects
// the same configuration back, so `config show` output is valid input to
// `config set`.
func TestConfigRoundTrip(t *testing.T) {
	c := api.DefaultSchedConfig()
	c.Fairshare, c.BillingGPU, c.PriorityMaxAge, c.PrivateData = "classic", 2.75, 3600, "jobs,usage"
	c.Licenses = []api.License{{Name: "fluent", Count: 1}, {Name: "matlab", Count: 10}}
	var b strings.Builder
	if err := Config(&b, &c); err != nil {
		t.Fatal(err)
	}
	var back api.SchedConfig
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		if err := back.Set(k, v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip gave %+v, want %+v", back, c)
	}
}

func TestQOSList(t *testing.T) {
	tests := map[string]struct {
		qos  []api.QOS
		want string
	}{
		// Preempt widens to its longest list instead of cutting it; an
		// unset mode is the cancel in force; unset limits are blank; a
		// QoS that migrates its victims shows its fallback (cancel when
		// unset), the others none.
		"defaults and one with every limit": {
			append(api.DefaultQOS(), api.QOS{Name: "long", Priority: 10, Preempt: []string{"besteffort", "burstable"},
				PreemptMode: api.PreemptSuspend, PreemptExemptTime: 600, MaxWall: 7 * 86400, MaxJobsPerUser: 4,
				MaxSubmitPerUser: 100, GrpCPUs: 512}, api.QOS{Name: "plain"},
				api.QOS{Name: "mover", PreemptMode: api.PreemptMigrate},
				api.QOS{Name: "parker", PreemptMode: api.PreemptMigrate, PreemptFallback: api.PreemptCheckpoint},
				api.QOS{Name: "saver", PreemptMode: api.PreemptCheckpoint}),
			`      Name   Priority              Preempt PreemptMode   PreemptExemptTime     MaxWall MaxJobsPU MaxSubmitPU  GrpCPUs PreemptFallback
---------- ---------- -------------------- ----------- ------------------- ----------- --------- ----------- -------- ---------------
guaranteed       1000           besteffort      cancel
 burstable        500                           cancel
besteffort          0                          requeue
      long         10 besteffort,burstable     suspend            00:10:00  7-00:00:00         4         100      512
     plain          0                           cancel
     mover          0                          migrate                                                                         cancel
    parker          0                          migrate                                                                     checkpoint
     saver          0                       checkpoint
`,
		},
		"none": {nil, `      Name   Priority    Preempt PreemptMode   PreemptExemptTime     MaxWall MaxJobsPU MaxSubmitPU  GrpCPUs PreemptFallback
---------- ---------- ---------- ----------- ------------------- ----------- --------- ----------- -------- ---------------
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := QOSList(&b, tc.qos); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestAccounts(t *testing.T) {
	tests := map[string]struct {
		accounts []api.Account
		users    []api.AccountUser
		want     string
	}{
		// Accounts by name under their parents; users before sub-accounts;
		// an empty Parent is root; a fraction of a share is kept.
		"tree": {
			[]api.Account{{Name: "theory", Parent: "physics", Shares: 1.5}, {Name: "physics", Parent: "root", Shares: 40}, {Name: "bio", Shares: 60}},
			[]api.AccountUser{{Name: "bob", Account: "theory", Shares: 2}, {Name: "alice", Account: "physics", Shares: 1}},
			`Account              Parent           User    Shares
-------------------- ---------- ---------- ---------
bio                  root                         60
physics              root                         40
 physics                             alice         1
 theory              physics                     1.5
  theory                               bob         2
`,
		},
		// Nothing the server holds is hidden, even what it should not hold.
		"missing parent and unknown account": {
			[]api.Account{{Name: "lost", Parent: "gone", Shares: 1}, {Name: "a", Shares: 1}},
			[]api.AccountUser{{Name: "zed", Account: "nowhere", Shares: 3}},
			`Account              Parent           User    Shares
-------------------- ---------- ---------- ---------
a                    root                          1
lost                 gone                          1
 nowhere                               zed         3
`,
		},
		"empty": {nil, nil, `Account              Parent           User    Shares
-------------------- ---------- ---------- ---------
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := Accounts(&b, tc.accounts, tc.users); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestWhy(t *testing.T) {
	var b strings.Builder
	why := &api.Why{JobID: 12, Ref: "12", State: api.StatePending, Lines: []string{
		"Job 12 is PENDING, reason Resources: no node of its partition has the CPUs and memory it asks for free now.",
		"Priority 1500, rank 1 of 1 pending.",
	}}
	if err := Why(&b, why); err != nil {
		t.Fatal(err)
	}
	want := "Job 12 is PENDING, reason Resources: no node of its partition has the CPUs and memory it asks for free now.\nPriority 1500, rank 1 of 1 pending.\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
