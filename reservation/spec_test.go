package reservation

import (
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
)

var now = time.Date(2030, 5, 6, 10, 30, 0, 0, time.UTC)

// kv splits "K=V" words into settings, as the CLI sends them.
func kv(words ...string) [][2]string {
	var out [][2]string
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}

func TestApplyCreate(t *testing.T) {
	for name, tc := range map[string]struct {
		words []string
		check func(t *testing.T, r api.Reservation, sel Selection)
		err   string
	}{
		"maintenance of all nodes for two hours": {
			words: []string{"ReservationName=maint", "StartTime=2030-05-07T16:00", "Duration=120", "Users=root", "Flags=maint,ignore_jobs", "Nodes=ALL"},
			check: func(t *testing.T, r api.Reservation, sel Selection) {
				if r.Name != "maint" || !r.StartTime.Equal(time.Date(2030, 5, 7, 16, 0, 0, 0, time.UTC)) || r.Duration() != 2*time.Hour {
					t.Errorf("window %s + %s", r.StartTime, r.Duration())
				}
				if !slices.Equal(r.Flags, []api.ResvFlag{api.ResvMaint, api.ResvIgnoreJobs}) || !sel.AllNodes || !sel.Place {
					t.Errorf("flags %v, selection %+v", r.Flags, sel)
				}
			},
		},
		"daily, ten nodes of a partition, two users": {
			words: []string{"user=alan,brenda", "starttime=noon", "duration=60", "flags=daily", "nodecnt=10", "PartitionName=pdebug"},
			check: func(t *testing.T, r api.Reservation, sel Selection) {
				if !r.StartTime.Equal(time.Date(2030, 5, 6, 12, 0, 0, 0, time.UTC)) || r.Period() != 24*time.Hour {
					t.Errorf("start %s, period %s", r.StartTime, r.Period())
				}
				if sel.NodeCnt != 10 || r.Partition != "pdebug" || !slices.Equal(r.Users, []string{"alan", "brenda"}) {
					t.Errorf("%+v %+v", r, sel)
				}
			},
		},
		"an account, one user denied, named nodes": {
			words: []string{"Accounts=foo", "Users=-alan", "StartTime=now", "EndTime=now+1hour", "Nodes=tux[8-9],tux1"},
			check: func(t *testing.T, r api.Reservation, sel Selection) {
				if !slices.Equal(r.NotUsers, []string{"alan"}) || len(r.Users) != 0 || !slices.Equal(r.Nodes, []string{"tux1", "tux8", "tux9"}) {
					t.Errorf("%+v", r)
				}
				if !r.Has(api.ResvSpecNodes) || r.Admits("alan", "foo") || !r.Admits("bob", "foo") || r.Admits("bob", "bar") {
					t.Errorf("flags %v, or who it admits is wrong", r.Flags)
				}
			},
		},
		"a consumable GPU block for a tenant": {
			words: []string{"Accounts=chem", "StartTime=now", "Duration=1-00:00:00", "TRES=cpu=64,gres/gpu=4", "Flags=PURGE_COMP=10"},
			check: func(t *testing.T, r api.Reservation, sel Selection) {
				if r.CPUs != 64 || r.GPUs != 4 || !r.Consumable() || r.PurgeAfter != 600 || !sel.Place {
					t.Errorf("%+v", r)
				}
			},
		},
		"unlimited": {
			words: []string{"Users=root", "StartTime=now", "Duration=UNLIMITED", "Nodes=n1"},
			check: func(t *testing.T, r api.Reservation, _ Selection) {
				if !r.EndTime.IsZero() || r.Over(now.Add(1000*time.Hour)) {
					t.Errorf("an unlimited reservation has no end: %s", r.EndTime)
				}
			},
		},
		"RFC 3339 from the CLI": {
			words: []string{"Users=root", "StartTime=2030-05-06T12:00:00+02:00", "Duration=30", "Nodes=n1"},
			check: func(t *testing.T, r api.Reservation, _ Selection) {
				if !r.StartTime.Equal(time.Date(2030, 5, 6, 10, 0, 0, 0, time.UTC)) {
					t.Errorf("start %s", r.StartTime)
				}
			},
		},
		"no end":            {words: []string{"Users=root", "StartTime=now", "Nodes=n1"}, err: "a reservation needs an end"},
		"no start":          {words: []string{"Users=root", "Duration=5", "Nodes=n1"}, err: "a reservation needs a start"},
		"end and duration":  {words: []string{"Users=root", "StartTime=now", "Duration=5", "EndTime=now+1hour"}, err: "not both"},
		"end before start":  {words: []string{"Users=root", "StartTime=now+1hour", "EndTime=now"}, err: "is not after the start"},
		"bad time":          {words: []string{"StartTime=25:00", "Duration=5"}, err: "StartTime=25:00: Invalid time specified"},
		"bad duration":      {words: []string{"StartTime=now", "Duration=1:xx"}, err: "Duration=1:xx"},
		"zero duration":     {words: []string{"StartTime=now", "Duration=0"}, err: "lasts more than 0"},
		"mixed users":       {words: []string{"Users=a,-b"}, err: "not both"},
		"unknown flag":      {words: []string{"Flags=SHINY"}, err: `Invalid flag "SHINY"`},
		"a flag not taken":  {words: []string{"Flags=WEEKDAY"}, err: "flag WEEKDAY is not taken: corral repeats"},
		"a key not taken":   {words: []string{"Licenses=matlab:2"}, err: "Licenses=matlab:2: not taken"},
		"unknown key":       {words: []string{"Colour=blue"}, err: `unknown reservation setting "Colour"`},
		"GPUs without CPUs": {words: []string{"TRES=gres/gpu=2"}, err: "needs cpu=N too"},
		"typed GPUs":        {words: []string{"TRES=cpu=2,gres/gpu:a100=2"}, err: "GPUs of any type"},
		"count and block":   {words: []string{"NodeCnt=2", "TRES=cpu=4", "StartTime=now", "Duration=5"}, err: "not both"},
		"+= on a create":    {words: []string{"Users+=bob"}, err: "not changed"},
		"bad node list":     {words: []string{"Nodes=n[1-"}, err: "never closed"},
	} {
		t.Run(name, func(t *testing.T) {
			var r api.Reservation
			sel, err := Apply(&r, kv(tc.words...), now, true)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r, sel)
		})
	}
}

func TestApplyUpdate(t *testing.T) {
	cur := api.Reservation{Name: "r", StartTime: now, EndTime: now.Add(time.Hour), Nodes: []string{"n1", "n2"},
		Users: []string{"alice"}, Flags: []api.ResvFlag{api.ResvMaint, api.ResvSpecNodes}}
	r := cur
	sel, err := Apply(&r, kv("StartTime=now+2hours", "Users+=bob", "Flags=DAILY,-MAINT", "Nodes-=n1"), now, false)
	if err != nil {
		t.Fatal(err)
	}
	if !r.StartTime.Equal(now.Add(2*time.Hour)) || r.Duration() != time.Hour {
		t.Errorf("a new start keeps the window's length: %s + %s", r.StartTime, r.Duration())
	}
	if !slices.Equal(r.Users, []string{"alice", "bob"}) || !slices.Equal(r.Nodes, []string{"n2"}) || !sel.Place {
		t.Errorf("users %v, nodes %v, selection %+v", r.Users, r.Nodes, sel)
	}
	if !slices.Equal(r.Flags, []api.ResvFlag{api.ResvDaily, api.ResvSpecNodes}) {
		t.Errorf("flags %v: DAILY added, MAINT taken away", r.Flags)
	}
	r2 := cur
	if sel, err := Apply(&r2, kv("Duration=30"), now, false); err != nil || r2.Duration() != 30*time.Minute || sel.Place {
		t.Errorf("a new duration keeps start and nodes: %v %s %+v", err, r2.Duration(), sel)
	}
	if _, err := Apply(&r2, kv("ReservationName=other"), now, false); err == nil {
		t.Error("an update renamed the reservation")
	}
}

func TestParseTRES(t *testing.T) {
	for in, want := range map[string]TRES{"cpu=64": {CPUs: 64}, "cpu=8,gres/gpu=2": {CPUs: 8, GPUs: 2}, "node=3": {Nodes: 3}, "CPU=1": {CPUs: 1}} {
		if got, err := ParseTRES(in); err != nil || got != want {
			t.Errorf("ParseTRES(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "cpu", "cpu=0", "cpu=-1", "cpu=1,cpu=2", "mem=4G", "license/matlab=1", "cpu=99999999999", "node=1,cpu=2"} {
		if _, err := ParseTRES(in); err == nil {
			t.Errorf("ParseTRES(%q) took it", in)
		}
	}
}
