package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSchedConfigTakesDefaultsForMissingSettings(t *testing.T) {
	cases := map[string]struct {
		json              string
		minJobAge, reqIDs int64
	}{
		"a configuration from before the retention settings": {`{"weights":{"age":5},"fairshare":"classic"}`, 300, 86400},
		"both set":           {`{"min_job_age_s":10,"request_id_retention_s":60}`, 10, 60},
		"zero keeps forever": {`{"min_job_age_s":0,"request_id_retention_s":0}`, 0, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var cfg SchedConfig
			if err := json.Unmarshal([]byte(c.json), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.MinJobAge != c.minJobAge || cfg.RequestIDRetention != c.reqIDs {
				t.Errorf("MinJobAge=%d RequestIDRetention=%d, want %d and %d", cfg.MinJobAge, cfg.RequestIDRetention, c.minJobAge, c.reqIDs)
			}
		})
	}
	var cfg SchedConfig
	if err := json.Unmarshal([]byte(`{"weights":{"age":5},"fairshare":"classic"}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Weights.Age != 5 || cfg.Fairshare != "classic" {
		t.Errorf("settings present were not read: %+v", cfg)
	}
}

func TestRetentionSettings(t *testing.T) {
	cases := map[string]struct {
		key, value string
		want       int64
		bad        bool
	}{
		"MinJobAge in seconds":      {"MinJobAge", "300", 300, false},
		"MinJobAge as a duration":   {"minjobage", "5m", 300, false},
		"RequestIDRetention in h":   {"RequestIDRetention", "24h", 86400, false},
		"a negative age is refused": {"MinJobAge", "-1", 0, true},
		"a word is refused":         {"RequestIDRetention", "forever", 0, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultSchedConfig()
			err := cfg.Set(c.key, c.value)
			if c.bad {
				if err == nil {
					t.Fatalf("%s=%s was accepted", c.key, c.value)
				}
				return
			}
			got := cfg.MinJobAge
			if c.key == "RequestIDRetention" {
				got = cfg.RequestIDRetention
			}
			if err != nil || got != c.want {
				t.Errorf("%s=%s: got %d (%v), want %d", c.key, c.value, got, err, c.want)
			}
		})
	}
}

// FuzzParsePreemptMode: any text is a mode or refused naming the modes; a
// fallback is a mode other than migrate; both are idempotent on their own
// output.
func FuzzParsePreemptMode(f *testing.F) {
	for _, s := range []string{"cancel", "REQUEUE", "Suspend", "migrate", "checkpoint", "", "kill", "migrate\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParsePreemptMode(s)
		if err != nil {
			if m != "" || !strings.Contains(err.Error(), PreemptModes) {
				t.Fatalf("%q: refused as %q with %v", s, m, err)
			}
		} else if again, err := ParsePreemptMode(string(m)); err != nil || again != m {
			t.Fatalf("%q read as %q, which reads as %q, %v", s, m, again, err)
		}
		fb, ferr := ParsePreemptFallback(s)
		switch {
		case ferr == nil && (err != nil || fb != m || fb == PreemptMigrate):
			t.Fatalf("%q: fallback %q accepted (mode %q, %v)", s, fb, m, err)
		case ferr != nil && err == nil && m != PreemptMigrate:
			t.Fatalf("%q: the mode %q refused as a fallback: %v", s, m, ferr)
		case ferr != nil && !strings.Contains(ferr.Error(), PreemptFallbacks):
			t.Fatalf("%q: %v does not say what to use", s, ferr)
		}
	})
}
