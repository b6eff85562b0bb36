package reservation

import (
	"strings"
	"testing"
	"time"

	"corral/api"
)

// The fuzz targets feed each parser what any client may send and check
// that it never panics and that what it takes is within its bounds.

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"now", "now+60minutes", "noon", "2030-01-31T08:00", "2030-01-31T08:00:00+02:00", "23:59:59", "tomorrow", "0001-01-01T00:00:00Z", "now+99999999999weeks"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s, now)
		if err == nil && (tm.Year() < 1970 || tm.Location() != time.UTC) {
			t.Fatalf("ParseTime(%q) = %s", s, tm)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"60", "1:00:00", "2-12:00:00", "UNLIMITED", "infinite", "0", "-5", "999999999-0", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && (d < 0 || d > MaxDuration || d == 0 && !strings.EqualFold(s, "UNLIMITED") && !strings.EqualFold(s, "INFINITE")) {
			t.Fatalf("ParseDuration(%q) = %s", s, d)
		}
	})
}

func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"MAINT,IGNORE_JOBS", "daily", "-FLEX", "PURGE_COMP=5:00", "PURGE_COMP=0", "MAINT=1", "WEEKEND", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flags, err := ParseFlags(s)
		if err != nil {
			return
		}
		for _, fl := range flags {
			if fl.Secs < 0 || fl.Secs > 0 && fl.Flag != api.ResvPurgeComp {
				t.Fatalf("ParseFlags(%q) took %+v", s, fl)
			}
		}
	})
}

func FuzzParseTRES(f *testing.F) {
	for _, s := range []string{"cpu=64,gres/gpu=4", "node=2", "gres/gpu=1", "cpu=1,cpu=1", "mem=1G", "cpu=9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTRES(s)
		if err == nil && (tr.CPUs < 0 || tr.CPUs > MaxCount || tr.GPUs < 0 || tr.GPUs > MaxCount || tr.Nodes < 0 || tr.Nodes > MaxNodes ||
			tr.GPUs > 0 && tr.CPUs == 0 || tr.CPUs+tr.GPUs+tr.Nodes == 0) {
			t.Fatalf("ParseTRES(%q) = %+v", s, tr)
		}
	})
}

func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{"n[1-4],gpu7", "r[1-2]n[1-2]", "n[0-99999]", "a b", "[", "n[3-1]", "x,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ParseNodes(s)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxNodes {
			t.Fatalf("ParseNodes(%q) gave %d names", s, len(names))
		}
		for _, n := range names {
			if !validName(n) {
				t.Fatalf("ParseNodes(%q) gave %q", s, n)
			}
		}
	})
}

// FuzzApply runs a whole request of up to three settings, on a new
// reservation and as an update: what Apply takes has a start and, unless
// unlimited, an end after it.
func FuzzApply(f *testing.F) {
	f.Add("StartTime=now", "Duration=60", "Users=root,Nodes=n1", false)
	f.Add("Flags=DAILY", "Users+=bob", "Nodes-=n1", true)
	f.Add("TRES=cpu=4,gres/gpu=1", "Accounts=-x", "StartTime=noon", true)
	f.Fuzz(func(t *testing.T, a, b, c string, update bool) {
		var settings [][2]string
		for _, w := range []string{a, b, c} {
			for _, item := range strings.SplitN(w, ",Nodes", 2) {
				k, v, _ := strings.Cut(item, "=")
				settings = append(settings, [2]string{k, v})
			}
		}
		r := api.Reservation{}
		if update {
			r = api.Reservation{Name: "r", StartTime: now, EndTime: now.Add(time.Hour), Nodes: []string{"n1"}, Users: []string{"u"}}
		}
		if _, err := Apply(&r, settings, now, !update); err != nil {
			return
		}
		if r.StartTime.IsZero() || !r.EndTime.IsZero() && !r.EndTime.After(r.StartTime) {
			t.Fatalf("Apply(%q) took a window %s..%s", settings, r.StartTime, r.EndTime)
		}
		if len(r.Users) > 0 && len(r.NotUsers) > 0 || len(r.Accounts) > 0 && len(r.NotAccounts) > 0 {
			t.Fatalf("Apply(%q) both allows and denies", settings)
		}
	})
}
