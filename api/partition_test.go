package api

import "testing"

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
