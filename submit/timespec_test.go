package submit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTimeLimit(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int64
	}{
		"minutes":               {"90", 90 * 60},
		"zero minutes":          {"0", 0},
		"minutes:seconds":       {"5:30", 5*60 + 30},
		"minutes over an hour":  {"120:00", 2 * 3600},
		"hours:minutes:seconds": {"1:30:00", 90 * 60},
		"long hours":            {"48:00:00", 48 * 3600},
		"unchecked minutes":     {"0:90:00", 90 * 60},
		"days-hours":            {"2-12", (2*24 + 12) * 3600},
		"days-hours:minutes":    {"1-2:30", (26*60 + 30) * 60},
		"days-h:m:s":            {"3-04:05:06", ((3*24+4)*60+5)*60 + 6},
		"zero days":             {"0-1", 3600},
		"leading zeros":         {"007", 7 * 60},
		"unlimited":             {"UNLIMITED", 0},
		"unlimited lower case":  {"unlimited", 0},
		"infinite":              {"INFINITE", 0},
		"infinite mixed case":   {"Infinite", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTimeLimit(tc.in)
			if err != nil {
				t.Fatalf("ParseTimeLimit(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseTimeLimit(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseTimeLimitErrors(t *testing.T) {
	tests := map[string]struct {
		in, contains string
	}{
		"empty":             {"", "empty time limit"},
		"letters":           {"abc", `"abc" is not a whole number`},
		"unit suffix":       {"10m", `"10m" is not a whole number`},
		"negative":          {"-1", "cannot be negative"},
		"negative minutes":  {"1:-5", "cannot be negative"},
		"days not a number": {"x-1", `days "x"`},
		"four fields":       {"1:2:3:4", "too many fields"},
		"days with four":    {"1-1:2:3:4", "too many fields"},
		"empty field":       {"1::3", `"" is not a whole number`},
		"trailing colon":    {"5:", `"" is not a whole number`},
		"days without hour": {"1-", `"" is not a whole number`},
		"two dashes":        {"1-2-3", `"2-3"`},
		"decimal":           {"1.5", `"1.5"`},
		"space":             {" 10", `" 10"`},
		"plus sign":         {"+10", `"+10"`},
		"huge":              {"99999999999999999999", "too large: each field is at most 1000000000"},
		"eleven digits":     {"99999999999", `"99999999999" is too large`},
		"huge days":         {"99999999999-0", `days "99999999999" is too large`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTimeLimit(tc.in)
			if err == nil {
				t.Fatalf("ParseTimeLimit(%q) succeeded", tc.in)
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != "--time" {
				t.Errorf("error %v is not an *Error for --time", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.contains) || !strings.Contains(msg, "--time=") || !strings.Contains(msg, "D-H:M:S") {
				t.Errorf("error %q should name --time, contain %q and list the forms", msg, tc.contains)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[string]struct {
		in   int64
		want string
	}{
		"zero":             {0, "0:00"},
		"seconds":          {7, "0:07"},
		"minutes":          {65, "1:05"},
		"just under hour":  {3599, "59:59"},
		"hour":             {3600, "1:00:00"},
		"hours":            {10*3600 + 2*60 + 3, "10:02:03"},
		"just under a day": {86399, "23:59:59"},
		"day":              {86400, "1-00:00:00"},
		"days":             {12*86400 + 3*3600 + 4*60 + 5, "12-03:04:05"},
		"negative":         {-1, "INVALID"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FormatDuration(tc.in); got != tc.want {
				t.Errorf("FormatDuration(%d) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFormatTimeLimit(t *testing.T) {
	tests := map[string]struct {
		in   int64
		want string
	}{
		"unlimited": {0, "UNLIMITED"},
		"minute":    {60, "1:00"},
		"day":       {86400 + 1, "1-00:00:01"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FormatTimeLimit(tc.in); got != tc.want {
				t.Errorf("FormatTimeLimit(%d) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestTimeLimitRoundTrip checks that FormatTimeLimit is the inverse of
// ParseTimeLimit for every shape of output.
func TestTimeLimitRoundTrip(t *testing.T) {
	for _, secs := range []int64{0, 1, 59, 60, 61, 3599, 3600, 3601, 86399, 86400, 90061, 365 * 86400} {
		s := FormatTimeLimit(secs)
		got, err := ParseTimeLimit(s)
		if err != nil || got != secs {
			t.Errorf("ParseTimeLimit(FormatTimeLimit(%d) = %q) = %d, %v", secs, s, got, err)
		}
	}
}

func TestParseBegin(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	// now is a Wednesday at 10:20:30 local time.
	now := time.Date(2024, 3, 13, 10, 20, 30, 0, loc)
	at := func(d, h, m, s int) time.Time { return time.Date(2024, 3, d, h, m, s, 0, loc) }
	tests := map[string]struct {
		in   string
		want time.Time
	}{
		"clock later today":         {"16:00", at(13, 16, 0, 0)},
		"clock with seconds":        {"10:20:31", at(13, 10, 20, 31)},
		"clock exactly now":         {"10:20:30", now},
		"clock already past":        {"09:00", at(14, 9, 0, 0)},
		"clock one digit hour":      {"9:05", at(14, 9, 5, 0)},
		"midnight clock":            {"00:00", at(14, 0, 0, 0)},
		"date":                      {"2024-04-01", time.Date(2024, 4, 1, 0, 0, 0, 0, loc)},
		"date and time":             {"2024-04-01T08:30", time.Date(2024, 4, 1, 8, 30, 0, 0, loc)},
		"date and time with secs":   {"2024-04-01T08:30:15", time.Date(2024, 4, 1, 8, 30, 15, 0, loc)},
		"past date is allowed":      {"2020-01-01", time.Date(2020, 1, 1, 0, 0, 0, 0, loc)},
		"now":                       {"now", now},
		"now plus default seconds":  {"now+60", now.Add(time.Minute)},
		"now plus seconds":          {"now+30seconds", now.Add(30 * time.Second)},
		"now plus s":                {"now+5s", now.Add(5 * time.Second)},
		"now plus minutes":          {"now+10minutes", now.Add(10 * time.Minute)},
		"now plus min":              {"now+10min", now.Add(10 * time.Minute)},
		"now plus hours":            {"now+2hours", now.Add(2 * time.Hour)},
		"now plus hour":             {"now+1hour", now.Add(time.Hour)},
		"now plus days":             {"now+3days", now.Add(72 * time.Hour)},
		"now plus weeks":            {"now+1weeks", now.Add(7 * 24 * time.Hour)},
		"now plus upper case":       {"NOW+1HOUR", now.Add(time.Hour)},
		"now plus zero":             {"now+0", now},
		"today":                     {"today", at(13, 0, 0, 0)},
		"tomorrow":                  {"tomorrow", at(14, 0, 0, 0)},
		"midnight":                  {"midnight", at(14, 0, 0, 0)},
		"noon still today":          {"noon", at(13, 12, 0, 0)},
		"teatime":                   {"teatime", at(13, 16, 0, 0)},
		"fika":                      {"fika", at(13, 15, 0, 0)},
		"words in upper case":       {"TOMORROW", at(14, 0, 0, 0)},
		"date across a month end":   {"2024-02-29", time.Date(2024, 2, 29, 0, 0, 0, 0, loc)},
		"clock rolls into next day": {"10:20:29", at(14, 10, 20, 29)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBegin(tc.in, now)
			if err != nil {
				t.Fatalf("ParseBegin(%q): %v", tc.in, err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("ParseBegin(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseBeginNoonAfterNoon(t *testing.T) {
	now := time.Date(2024, 3, 13, 13, 0, 0, 0, time.UTC)
	got, err := ParseBegin("noon", now)
	want := time.Date(2024, 3, 14, 12, 0, 0, 0, time.UTC)
	if err != nil || !got.Equal(want) {
		t.Errorf("ParseBegin(noon) at 13:00 = %v, %v; want %v", got, err, want)
	}
}

func TestParseBeginErrors(t *testing.T) {
	now := time.Date(2024, 3, 13, 10, 20, 30, 0, time.UTC)
	tests := map[string]struct {
		in, contains string
	}{
		"empty":            {"", "empty begin time"},
		"word":             {"soon", `"soon" is not a time`},
		"hour only":        {"10", `"10" is not a time`},
		"hour too big":     {"24:00", "24-hour clock"},
		"minute too big":   {"10:60", "24-hour clock"},
		"second too big":   {"10:00:60", "24-hour clock"},
		"too many fields":  {"1:2:3:4", "is not a time"},
		"bad date":         {"2024-13-01", `"2024-13-01" is not a date`},
		"bad day":          {"2024-02-30", "is not a date"},
		"date bad clock":   {"2024-04-01T25:00", "24-hour clock"},
		"date empty clock": {"2024-04-01T", "is not a time"},
		"unknown unit":     {"now+5fortnights", `unknown unit "fortnights"`},
		"no offset":        {"now+", "is not a whole number"},
		"negative offset":  {"now+-5", "is not a whole number"},
		"unit only":        {"now+hours", `offset "" is not a whole number`},
		"offset too big":   {"now+99999weeks", "more than 100 years"},
		"now minus":        {"now-5", "is not a"},
		"am pm":            {"10:00PM", "24-hour clock"},
		"signed clock":     {"+1:00", "24-hour clock"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseBegin(tc.in, now)
			if err == nil {
				t.Fatalf("ParseBegin(%q) succeeded", tc.in)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.contains) || !strings.HasPrefix(msg, "--begin") {
				t.Errorf("error %q should start with --begin and contain %q", msg, tc.contains)
			}
		})
	}
}
