package qos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
)

func TestCheck(t *testing.T) {
	all := map[string]*api.QOS{"besteffort": {Name: "besteffort"}, "normal": {Name: "normal"}}
	cases := map[string]struct {
		q    api.QOS
		want string // "" for valid
	}{
		"a valid QoS":              {api.QOS{Name: "high", Preempt: []string{"besteffort"}, PreemptMode: "Requeue"}, ""},
		"no name":                  {api.QOS{}, "needs a name"},
		"preempts itself":          {api.QOS{Name: "high", Preempt: []string{"high"}}, "cannot preempt itself"},
		"preempts an unknown QoS":  {api.QOS{Name: "high", Preempt: []string{"gold"}}, "gold, which is no QoS (QoS: besteffort, normal)"},
		"an unknown mode":          {api.QOS{Name: "high", PreemptMode: "kill"}, "use cancel, requeue, suspend, migrate or checkpoint"},
		"migrate, falling back":    {api.QOS{Name: "high", PreemptMode: "Migrate", PreemptFallback: "REQUEUE"}, ""},
		"checkpoint":               {api.QOS{Name: "high", PreemptMode: "checkpoint"}, ""},
		"an unknown fallback":      {api.QOS{Name: "high", PreemptMode: "migrate", PreemptFallback: "kill"}, `preempt fallback "kill": use cancel, requeue, suspend or checkpoint`},
		"migrate as its fallback":  {api.QOS{Name: "high", PreemptMode: "migrate", PreemptFallback: "migrate"}, "migrate cannot be its own fallback"},
		"a negative priority":      {api.QOS{Name: "high", Priority: -1}, "--priority must be ≥ 0"},
		"a negative limit":         {api.QOS{Name: "high", MaxSubmitPerUser: -2}, "limits must be positive"},
		"a negative exempt time":   {api.QOS{Name: "high", PreemptExemptTime: -1}, "limits must be positive"},
		"a negative wall limit":    {api.QOS{Name: "high", MaxWall: -1}, "limits must be positive"},
		"a negative group CPU cap": {api.QOS{Name: "high", GrpCPUs: -1}, "limits must be positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := tc.q
			err := Check(&q, all)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one holding %q", err, tc.want)
			}
			if tc.want == "" && string(q.PreemptMode) != strings.ToLower(string(tc.q.PreemptMode)) {
				t.Errorf("mode %q stored, want the canonical %s", q.PreemptMode, strings.ToLower(string(tc.q.PreemptMode)))
			}
			if tc.want == "" && string(q.PreemptFallback) != strings.ToLower(string(tc.q.PreemptFallback)) {
				t.Errorf("fallback %q stored, want the canonical %s", q.PreemptFallback, strings.ToLower(string(tc.q.PreemptFallback)))
			}
		})
	}
}

func TestSubmitLimit(t *testing.T) {
	q := &api.QOS{Name: "normal", MaxSubmitPerUser: 2}
	if err := SubmitLimit(q, "alice", 1); err != nil {
		t.Errorf("the second job refused: %v", err)
	}
	err := SubmitLimit(q, "alice", 2)
	if err == nil || !strings.Contains(err.Error(), "user alice already has 2 jobs pending or running in QoS normal, its limit is 2") {
		t.Errorf("the third job: %v, want the user's count and the limit", err)
	}
	if SubmitLimit(&api.QOS{Name: "free"}, "alice", 1000) != nil || SubmitLimit(nil, "alice", 1000) != nil {
		t.Error("no limit refused a job")
	}
}

func TestUsageLimits(t *testing.T) {
	u := NewUsage()
	u.Add("q", "alice", 3)
	u.Add("q", "bob", 2)
	u.Add("", "alice", 64) // a job without QoS counts nowhere
	cases := map[string]struct {
		q    *api.QOS
		user string
		cpus int
		want api.Reason
	}{
		"under MaxJobsPerUser": {&api.QOS{Name: "q", MaxJobsPerUser: 2}, "alice", 1, ""},
		"at MaxJobsPerUser":    {&api.QOS{Name: "q", MaxJobsPerUser: 1}, "alice", 1, api.ReasonQOSMaxJobsPerUserLimit},
		"another user's count": {&api.QOS{Name: "q", MaxJobsPerUser: 1}, "carol", 1, ""},
		"within GrpCPUs":       {&api.QOS{Name: "q", GrpCPUs: 6}, "carol", 1, ""},
		"over GrpCPUs":         {&api.QOS{Name: "q", GrpCPUs: 6}, "carol", 2, api.ReasonQOSGrpCpuLimit},
		"no QoS":               {nil, "alice", 100, ""},
	}
	for name, tc := range cases {
		if got := u.Limit(tc.q, tc.user, tc.cpus); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	if WallLimit(&api.QOS{MaxWall: 3600}, 2*time.Hour) != api.ReasonQOSMaxWallDurationLimit || WallLimit(&api.QOS{MaxWall: 3600}, time.Hour) != "" {
		t.Error("MaxWall misjudged")
	}
}

func TestPreemption(t *testing.T) {
	gold := &api.QOS{Name: "gold", Preempt: []string{"scavenger"}}
	scav := &api.QOS{Name: "scavenger", PreemptExemptTime: 60, PreemptMode: api.PreemptSuspend}
	cases := map[string]struct {
		p, v    *api.QOS
		elapsed time.Duration
		want    bool
	}{
		"a listed QoS past its exempt time": {gold, scav, time.Minute, true},
		"inside the exempt time":            {gold, scav, 59 * time.Second, false},
		"a QoS not listed":                  {scav, gold, time.Hour, false},
		"no preemptor QoS":                  {nil, scav, time.Hour, false},
	}
	for name, tc := range cases {
		if got := MayPreempt(tc.p, tc.v, tc.elapsed); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if Mode(scav, api.PreemptRequeue) != api.PreemptSuspend || Mode(gold, api.PreemptRequeue) != api.PreemptRequeue || Mode(nil, "") != api.PreemptCancel {
		t.Error("the mode is not the QoS's, else the partition's, else cancel")
	}
}

// TestVictimOrder: cheapest first, and victims that tie on priority and
// run time come in job id order whatever order they are given in.
func TestVictimOrder(t *testing.T) {
	vs := []Victim{{ID: 9, Priority: 5, Elapsed: time.Hour}, {ID: 3, Priority: 5, Elapsed: time.Hour},
		{ID: 7, Priority: 1, Elapsed: 2 * time.Hour}, {ID: 1, Priority: 5, Elapsed: time.Minute}}
	for range 5 {
		slices.Reverse(vs)
		got := slices.Clone(vs)
		slices.SortFunc(got, CompareVictims)
		var ids []uint64
		for _, v := range got {
			ids = append(ids, v.ID)
		}
		if !slices.Equal(ids, []uint64{7, 1, 3, 9}) {
			t.Fatalf("order %v, want [7 1 3 9]", ids)
		}
	}
}

func TestFallback(t *testing.T) {
	for _, c := range []struct {
		q    *api.QOS
		want api.PreemptMode
	}{
		{nil, api.PreemptCancel},
		{&api.QOS{Name: "q", PreemptMode: api.PreemptMigrate}, api.PreemptCancel},
		{&api.QOS{Name: "q", PreemptMode: api.PreemptMigrate, PreemptFallback: api.PreemptCheckpoint}, api.PreemptCheckpoint},
	} {
		if got := Fallback(c.q); got != c.want {
			t.Errorf("Fallback(%+v) = %s, want %s", c.q, got, c.want)
		}
	}
}
