//go:build !corral_client

package main

import (
	"strings"
	"testing"

	"corral/ctld"
)

// TestRateLimitFlags checks corral ctld's --rate-* flags: rates with or
// without /s, fractions, off (or a negative rate) for no limit, and
// refusals that name the flag and say what to give.
func TestRateLimitFlags(t *testing.T) {
	tests := map[string]struct {
		values map[string]string
		want   ctld.RateLimits
		err    string
	}{
		"none: the defaults": {values: nil, want: ctld.RateLimits{}},
		"rates and bursts":   {values: map[string]string{"rate-writes": "50/s", "rate-write-burst": "200", "rate-reads": "0.5", "rate-read-burst": "10"}, want: ctld.RateLimits{Writes: 50, WriteBurst: 200, Reads: 0.5, ReadBurst: 10}},
		"off":                {values: map[string]string{"rate-writes": "off", "rate-reads": "-1"}, want: ctld.RateLimits{Writes: -1, Reads: -1}},
		"a rate that is not": {values: map[string]string{"rate-writes": "fast"}, err: "--rate-writes=fast: not a rate: give requests a second, e.g. 50 or 0.5/s, or off"},
		"a zero rate":        {values: map[string]string{"rate-reads": "0"}, err: "--rate-reads=0: not a rate"},
		"NaN":                {values: map[string]string{"rate-reads": "NaN"}, err: "--rate-reads=NaN: not a rate"},
		"a burst of none":    {values: map[string]string{"rate-write-burst": "0"}, err: "--rate-write-burst=0: not a burst: give a whole number of requests, at least 1"},
		"a fractional burst": {values: map[string]string{"rate-read-burst": "2.5"}, err: "--rate-read-burst=2.5: not a burst"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := &optSet{last: map[string]string{}}
			for k, v := range tc.values {
				o.last[k] = v
			}
			got, err := rateLimits(o)
			switch {
			case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
				t.Fatalf("error %v, want one starting %q", err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Fatalf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
