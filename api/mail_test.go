package api

import (
	"slices"
	"strings"
	"testing"
)

// TestParseMailType reads sbatch's --mail-type lists in any case, expands
// ALL as Slurm does (without the time-limit warnings and ARRAY_TASKS) and
// refuses unknown names and NONE beside others.
func TestParseMailType(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
		err  string
	}{
		"one":           {in: "END", want: []string{MailEnd}},
		"any case":      {in: "begin,End", want: []string{MailBegin, MailEnd}},
		"canonical":     {in: "TIME_LIMIT_50,FAIL,BEGIN,FAIL", want: []string{MailBegin, MailFail, MailTimeLimit50}},
		"all":           {in: "ALL", want: []string{MailBegin, MailEnd, MailFail, MailRequeue, MailInvalidDepend, MailStageOut}},
		"all and more":  {in: "all,TIME_LIMIT_80,ARRAY_TASKS", want: []string{MailBegin, MailEnd, MailFail, MailRequeue, MailInvalidDepend, MailStageOut, MailTimeLimit80, MailArrayTasks}},
		"none":          {in: "NONE", want: nil},
		"none and more": {in: "NONE,END", err: "NONE cannot be combined"},
		"unknown":       {in: "BEGIN,START", err: `unknown mail type "START"`},
		"empty item":    {in: "BEGIN,", err: `unknown mail type ""`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMailType(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseMailType(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseMailType(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestMailUserProblem refuses recipients that could read as an option of
// the mail program or are not addresses.
func TestMailUserProblem(t *testing.T) {
	for in, ok := range map[string]bool{
		"alice": true, "alice@example.org": true, "a.b+c=d%e_f-g@x-y.z": true,
		"": false, "-oX": false, "a@b@c": false, "a b": false, "a;b": false, "a\nb": false, "é@x": false,
		strings.Repeat("a", MaxMailUserBytes+1): false,
	} {
		if got := MailUserProblem(in) == ""; got != ok {
			t.Errorf("MailUserProblem(%q) accepts: %v, want %v", in, got, ok)
		}
	}
}

// TestMailSettings checks the notification settings' forms.
func TestMailSettings(t *testing.T) {
	good := map[string]string{"MailProg": "/usr/local/bin/notify", "MailWebhook": "https://hooks.example/x?y=1", "MailDomain": "example.org"}
	for k, v := range good {
		c := DefaultSchedConfig()
		if err := c.Set(k, v); err != nil {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
	bad := [][2]string{{"MailProg", "mail"}, {"MailProg", "/usr/bin/../bin/mail"}, {"MailProg", "/bin/a b"},
		{"MailWebhook", "ftp://x"}, {"MailWebhook", "https://u:p@x/"}, {"MailWebhook", "http:///x"}, {"MailDomain", "a@b"}}
	for _, kv := range bad {
		c := DefaultSchedConfig()
		if err := c.Set(kv[0], kv[1]); err == nil {
			t.Errorf("%s=%s accepted", kv[0], kv[1])
		}
	}
	c := DefaultSchedConfig()
	for _, kv := range [][2]string{{"MailProg", "none"}, {"MailWebhook", "none"}} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if c.MailProg != MailProgNone || c.MailWebhook != "" {
		t.Errorf("none: MailProg %q, MailWebhook %q", c.MailProg, c.MailWebhook)
	}
	if got := RedactURL("https://hooks.example/services/T0/B0/secret?x=1"); got != "https://hooks.example/…" {
		t.Errorf("RedactURL shows %q", got)
	}
	if got := MailRecipient("", "alice", "example.org"); got != "alice@example.org" {
		t.Errorf("recipient %q", got)
	}
}

// FuzzParseMailType: any text is refused or reads as a list CheckMailTypes
// takes.
func FuzzParseMailType(f *testing.F) {
	for _, s := range []string{"ALL", "NONE", "begin,end", "TIME_LIMIT_50,ARRAY_TASKS", ",", "all,none"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseMailType(s)
		if err != nil {
			return
		}
		if err := CheckMailTypes(got); err != nil {
			t.Fatalf("ParseMailType(%q) = %v, which CheckMailTypes refuses: %v", s, got, err)
		}
	})
}
