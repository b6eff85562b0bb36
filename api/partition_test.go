package api

import (
	"strings"
	"testing"
)

func TestShareFor(t *testing.T) {
	cases := map[string]struct {
		noMigrate bool
		share     string
		want      string
	}{
		"the default":                {want: ShareNFS},
		"a partition that says nfs":  {share: "nfs", want: ShareNFS},
		"the job asked --no-migrate": {noMigrate: true, want: ShareVirtiofs},
		"a partition of virtiofs":    {share: "virtiofs", want: ShareVirtiofs},
		"both":                       {noMigrate: true, share: "nfs", want: ShareVirtiofs},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Partition{Share: tc.share}).ShareFor(tc.noMigrate); got != tc.want {
				t.Errorf("ShareFor = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWarmFor(t *testing.T) {
	cases := map[string]struct {
		noWarm bool
		warm   string
		want   bool
	}{
		"the default":               {want: true},
		"a partition that says yes": {warm: WarmYes, want: true},
		"the job asked --no-warm":   {noWarm: true, want: false},
		"a partition that says no":  {warm: WarmNo, want: false},
		"both":                      {noWarm: true, warm: WarmYes, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Partition{Warm: tc.warm}).WarmFor(tc.noWarm); got != tc.want {
				t.Errorf("WarmFor = %v, want %v", got, tc.want)
			}
		})
	}
	var p Partition
	if err := p.Set("warm", "NO", nil); err != nil || p.Warm != WarmNo {
		t.Errorf("Set(warm, NO) = %v, Warm %q", err, p.Warm)
	}
	if err := p.Set("Warm", "sometimes", nil); err == nil || !strings.Contains(err.Error(), "use yes") {
		t.Errorf("Set(Warm, sometimes) = %v, want an error saying what to use", err)
	}
}
