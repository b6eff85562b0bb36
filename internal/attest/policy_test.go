package attest

import (
	"errors"
	"strings"
	"testing"
)

// TestParsePolicy covers the operator's JSON form.
func TestParsePolicy(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	cases := map[string]struct {
		json     string
		wantPCRs []int
		wantText string
	}{
		"PCRs and keys": {
			json:     `{"pcrs": {"7": "` + digest + `", "0": "` + strings.ToUpper(digest) + `"}, "endorsement_keys": ["` + digest + `"]}`,
			wantPCRs: []int{0, 7},
		},
		"keys only":        {json: `{"endorsement_keys": ["` + digest + `"]}`, wantPCRs: []int{}},
		"a misspelt field": {json: `{"pcr": {}}`, wantText: `unknown field "pcr"`},
		"PCR 24":           {json: `{"pcrs": {"24": "` + digest + `"}}`, wantText: "index 24: a TPM has PCRs 0–23"},
		"PCR -1":           {json: `{"pcrs": {"-1": "` + digest + `"}}`, wantText: "index -1"},
		"a short value":    {json: `{"pcrs": {"7": "abcd"}}`, wantText: "PCR 7: \"abcd\" is not a SHA-256 value"},
		"a bad fingerprint": {
			json: `{"endorsement_keys": ["` + strings.Repeat("zz", 32) + `"]}`, wantText: "is not a fingerprint",
		},
		"two objects": {json: `{} {}`, wantText: "more than one JSON value"},
		"not JSON":    {json: `pcrs: 7`, wantText: "attestation policy:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.json))
			if tc.wantText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.PCRSelection(); len(got) != len(tc.wantPCRs) || (len(got) > 0 && got[0] != tc.wantPCRs[0]) {
				t.Fatalf("PCRSelection() = %v, want %v", got, tc.wantPCRs)
			}
			values, err := p.PCRValues()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range values {
				if len(v) != 32 || v[0] != 0xab {
					t.Fatalf("PCR value %x, want ab…", v)
				}
			}
		})
	}
}

// TestCheckEK covers the allow list.
func TestCheckEK(t *testing.T) {
	allowed, unknown := softEK(t, "policy-1"), softEK(t, "policy-2")
	policy := Policy{EndorsementKeys: []string{strings.ToUpper(allowed.Fingerprint())}}
	cases := map[string]struct {
		ek       EK
		wantErr  error
		wantText string
	}{
		"on the list":     {ek: allowed},
		"not on the list": {ek: unknown, wantErr: ErrUnknownEK, wantText: unknown.Fingerprint() + " is not on the allow list: add"},
		"not a key":       {ek: EK{Public: []byte("garbage")}, wantErr: ErrMalformed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := policy.CheckEK(tc.ek)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("got %v, want %v saying %q", err, tc.wantErr, tc.wantText)
			}
		})
	}
}
