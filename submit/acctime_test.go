package submit

import (
	"strings"
	"testing"
	"time"
)

func TestParseAcctTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	day := func(m time.Month, d, h, min, s int) time.Time { return time.Date(2026, m, d, h, min, s, 0, time.UTC) }
	cases := []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"today", day(12, 1, 0, 0, 0)},
		{"midnight", day(12, 1, 0, 0, 0)},
		{"noon", day(11, 30, 12, 0, 0)},
		{"08:00", day(12, 1, 8, 0, 0)},
		{"11:00", day(11, 30, 11, 0, 0)},
		{"09:15:30", day(12, 1, 9, 15, 30)},
		{"9:15am", day(12, 1, 9, 15, 0)},
		{"1:00PM", day(11, 30, 13, 0, 0)},
		{"now-2hours", now.Add(-2 * time.Hour)},
		{"now-1days", now.Add(-24 * time.Hour)},
		{"now+30", now.Add(30 * time.Second)},
		{"2026-11-02", day(11, 2, 0, 0, 0)},
		{"2026-11-02T14:05", day(11, 2, 14, 5, 0)},
		{"1102", day(11, 2, 0, 0, 0)},
		{"110226", day(11, 2, 0, 0, 0)},
		{"11/02", day(11, 2, 0, 0, 0)},
		{"11/02/26-08:00", day(11, 2, 8, 0, 0)},
		{"11.02.26", day(11, 2, 0, 0, 0)},
		{"12/25", time.Date(2025, 12, 25, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := ParseAcctTime("--starttime", c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseAcctTimeRefuses(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for _, in := range []string{"", "yesterdayish", "25:00", "13:00pm", "02/30", "13/01", "2026-13-01", "now-", "now-3fortnights", "1/2/3/4", "123"} {
		_, err := ParseAcctTime("--starttime", in, now)
		if err == nil {
			t.Errorf("%q: accepted", in)
			continue
		}
		if !strings.Contains(err.Error(), "--starttime") {
			t.Errorf("%q: the error %q does not name the option", in, err)
		}
	}
}

// FuzzParseAcctTime: any input is parsed or refused with an error that
// names the option, never a panic; what parses, parses again the same.
func FuzzParseAcctTime(f *testing.F) {
	for _, s := range []string{"now-1days", "08:00", "9:15am", "11/02/26-08:00", "1102", "2026-11-02T14:05", "midnight", "11.02"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseAcctTime("-S", s, now)
		if err != nil {
			if !strings.Contains(err.Error(), "-S") {
				t.Fatalf("%q: error %q does not name the option", s, err)
			}
			return
		}
		again, err := ParseAcctTime("-S", s, now)
		if err != nil || !again.Equal(got) {
			t.Fatalf("%q: parsed %v, then %v, %v", s, got, again, err)
		}
	})
}
