package api

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Mail event types (sbatch --mail-type), Slurm's names. A job lists the
// ones it wants in canonical order (MailTypes' order); ALL and NONE are
// only ways of writing a list.
const (
	MailBegin         = "BEGIN"
	MailEnd           = "END"
	MailFail          = "FAIL"
	MailRequeue       = "REQUEUE"
	MailInvalidDepend = "INVALID_DEPEND"
	MailStageOut      = "STAGE_OUT"
	MailTimeLimit     = "TIME_LIMIT"
	MailTimeLimit90   = "TIME_LIMIT_90"
	MailTimeLimit80   = "TIME_LIMIT_80"
	MailTimeLimit50   = "TIME_LIMIT_50"
	MailArrayTasks    = "ARRAY_TASKS"
)

// MailTypes lists the mail types in canonical order.
var MailTypes = []string{
	MailBegin, MailEnd, MailFail, MailRequeue, MailInvalidDepend, MailStageOut,
	MailTimeLimit, MailTimeLimit90, MailTimeLimit80, MailTimeLimit50, MailArrayTasks,
}

// mailAll is what --mail-type=ALL stands for, as in Slurm: the time-limit
// warnings and ARRAY_TASKS are asked for by name only.
var mailAll = []string{MailBegin, MailEnd, MailFail, MailRequeue, MailInvalidDepend, MailStageOut}

// MaxMailUserBytes bounds --mail-user.
const MaxMailUserBytes = 256

// ParseMailType reads sbatch's --mail-type: a comma-separated list of the
// MailTypes, ALL or NONE, in any case. It returns the canonical list (nil
// for NONE).
func ParseMailType(s string) ([]string, error) {
	want := map[string]bool{}
	none := false
	for item := range strings.SplitSeq(s, ",") {
		name := strings.ToUpper(strings.TrimSpace(item))
		switch {
		case name == "NONE":
			none = true
		case name == "ALL":
			for _, t := range mailAll {
				want[t] = true
			}
		case slices.Contains(MailTypes, name):
			want[name] = true
		default:
			return nil, fmt.Errorf("unknown mail type %q (use NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, STAGE_OUT, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 or ARRAY_TASKS, comma-separated)", strings.TrimSpace(item))
		}
	}
	if none {
		if len(want) > 0 {
			return nil, fmt.Errorf("NONE cannot be combined with other mail types")
		}
		return nil, nil
	}
	var out []string
	for _, t := range MailTypes {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// CheckMailTypes says why list is not a canonical mail type list (known
// names, each once, in MailTypes' order), or nil.
func CheckMailTypes(list []string) error {
	last := -1
	for _, t := range list {
		i := slices.Index(MailTypes, t)
		switch {
		case i < 0:
			return fmt.Errorf("unknown mail type %q (known: %s)", t, strings.Join(MailTypes, ", "))
		case i <= last:
			return fmt.Errorf("mail type %q is out of order or given twice (list them once each, in the order %s)", t, strings.Join(MailTypes, ", "))
		}
		last = i
	}
	return nil
}

// MailUserProblem says what is wrong with a --mail-user recipient, or "":
// a user name or an address (user@domain) of letters, digits and
// ".-_+=%@", not starting with '-' (the recipient is an argument of the
// mail program, and must never read as one of its options).
func MailUserProblem(s string) string {
	switch {
	case s == "":
		return "is empty; give a user name or an address, e.g. alice@example.org"
	case len(s) > MaxMailUserBytes:
		return fmt.Sprintf("is %d bytes long; the most is %d", len(s), MaxMailUserBytes)
	case s[0] == '-':
		return "must not start with '-'"
	case strings.Count(s, "@") > 1:
		return "may hold at most one '@'"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_+=%@", c) >= 0) {
			return fmt.Sprintf("may hold only letters, digits and .-_+=%%@ (byte %d is %q)", i, c)
		}
	}
	return ""
}

// DefaultMailProg is the mail program a cluster uses when MailProg is
// unset, where the controller has it (Slurm's default).
const DefaultMailProg = "/usr/bin/mail"

// MailProgNone is the MailProg value that runs no mail program.
const MailProgNone = "none"

// init adds the notification settings (docs/mail.md).
func init() {
	configKeys["MailProg"] = func(c *SchedConfig, v string) error {
		switch {
		case v == "" || strings.EqualFold(v, "default"):
			c.MailProg = ""
		case strings.EqualFold(v, MailProgNone):
			c.MailProg = MailProgNone
		case !filepath.IsAbs(v) || filepath.Clean(v) != v || len(v) > 4096 || strings.ContainsAny(v, "\x00\n\r\t "):
			return fmt.Errorf("MailProg=%s: give the absolute, clean path of a program without white space (e.g. /usr/bin/mail), default or none", v)
		default:
			c.MailProg = v
		}
		return nil
	}
	configKeys["MailWebhook"] = func(c *SchedConfig, v string) error {
		if v == "" || strings.EqualFold(v, "none") {
			c.MailWebhook = ""
			return nil
		}
		if why := webhookProblem(v); why != "" {
			return fmt.Errorf("MailWebhook=%s: %s", v, why)
		}
		c.MailWebhook = v
		return nil
	}
	configKeys["ClusterName"] = func(c *SchedConfig, v string) error {
		if strings.EqualFold(v, "none") {
			v = ""
		}
		if v != "" && (len(v) > 64 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" || v[0] == '-') {
			return fmt.Errorf("ClusterName=%s: give a name of at most 64 letters, digits, '.', '_' and '-'", v)
		}
		c.ClusterName = v
		return nil
	}
	configKeys["MailDomain"] = func(c *SchedConfig, v string) error {
		if v == "" || strings.EqualFold(v, "none") {
			c.MailDomain = ""
			return nil
		}
		if why := MailUserProblem(v); why != "" || strings.Contains(v, "@") {
			return fmt.Errorf("MailDomain=%s: give a domain such as example.org", v)
		}
		c.MailDomain = v
		return nil
	}
}

// webhookProblem says what is wrong with a webhook URL, or "".
func webhookProblem(v string) string {
	u, err := url.Parse(v)
	switch {
	case len(v) > 4096:
		return "is longer than 4096 bytes"
	case err != nil:
		return err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		return "give an http:// or https:// URL"
	case u.Host == "":
		return "the URL names no host"
	case u.User != nil:
		return "put no credentials in the URL"
	}
	return ""
}

// MailRecipient is where a job's notifications go: its --mail-user, or
// its user, with domain added to an address without one.
func MailRecipient(mailUser, user, domain string) string {
	to := mailUser
	if to == "" {
		to = user
	}
	if domain != "" && !strings.Contains(to, "@") {
		to += "@" + domain
	}
	return to
}

// RedactURL returns a URL's scheme and host only ("https://hooks.example/…"),
// for showing a setting whose path or query may be a secret; "" stays "".
func RedactURL(v string) string {
	u, err := url.Parse(v)
	if v == "" || err != nil {
		return v
	}
	if u.Path == "" && u.RawQuery == "" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// MailNotice is the JSON body the leader POSTs to the MailWebhook for one
// job notification (docs/mail.md). Key is the notification's idempotency
// key, also sent as the Idempotency-Key header: every delivery of one
// notification carries the same key. Attempt counts the leaders' tries;
// above 1, an earlier try may have been delivered too.
type MailNotice struct {
	Key        string    `json:"key"`
	Attempt    int       `json:"attempt"`
	Event      string    `json:"event"`
	MailType   string    `json:"mail_type"`
	Subject    string    `json:"subject"`
	Recipient  string    `json:"recipient"`
	User       string    `json:"user"`
	JobID      uint64    `json:"job_id"`
	ArrayJobID uint64    `json:"array_job_id,omitempty"`
	Job        string    `json:"job"`
	Name       string    `json:"name"`
	State      string    `json:"state,omitempty"`
	ExitCode   int       `json:"exit_code"`
	QueuedS    int64     `json:"queued_s,omitempty"`
	RunS       int64     `json:"run_s,omitempty"`
	Time       time.Time `json:"time"`
}
