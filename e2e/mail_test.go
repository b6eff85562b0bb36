package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// delivery is one notice as a sink received it.
type delivery struct {
	key, event, subject, to string
	attempt                 int
}

// mailSinks are the test's mail program (a script appending to a log) and
// webhook receiver.
type mailSinks struct {
	dir, log, inflight, release string
	hook                        *httptest.Server
	mu                          sync.Mutex
	posted                      []delivery
}

// newMailSinks writes the mail program: it appends
// KEY|ATTEMPT|EVENT|SUBJECT|RECIPIENT to its log and, for a job named
// blocker on a first attempt, waits for the release file first (after
// touching the in-flight file), so that the test can kill the leader while
// a delivery is under way.
func newMailSinks(t *testing.T) *mailSinks {
	m := &mailSinks{dir: t.TempDir()}
	m.log, m.inflight, m.release = filepath.Join(m.dir, "mail.log"), filepath.Join(m.dir, "inflight"), filepath.Join(m.dir, "release")
	script := `#!/bin/sh
cat >/dev/null
case "$2" in *Name=blocker*)
	if [ "$CORRAL_MAIL_ATTEMPT" = 1 ]; then
		touch ` + m.inflight + `
		i=0
		while [ ! -e ` + m.release + ` ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
	fi;;
esac
printf '%s|%s|%s|%s|%s\n' "$CORRAL_MAIL_KEY" "$CORRAL_MAIL_ATTEMPT" "$CORRAL_MAIL_EVENT" "$2" "$3" >> ` + m.log + "\n"
	if err := os.WriteFile(filepath.Join(m.dir, "mailprog"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n api.MailNotice
		if json.NewDecoder(r.Body).Decode(&n) != nil || r.Header.Get("Idempotency-Key") != n.Key {
			http.Error(w, "bad notice", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.posted = append(m.posted, delivery{key: n.Key, event: n.Event, subject: n.Subject, to: n.Recipient, attempt: n.Attempt})
		m.mu.Unlock()
	}))
	t.Cleanup(m.hook.Close)
	return m
}

// mailed reads the mail program's log.
func (m *mailSinks) mailed(t *testing.T) []delivery {
	b, _ := os.ReadFile(m.log)
	var out []delivery
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		out = append(out, delivery{key: f[0], attempt: n, event: f[2], subject: f[3], to: f[4]})
	}
	return out
}

func (m *mailSinks) webhook() []delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.posted)
}

// has reports whether a sink received a notice whose subject holds s.
func has(ds []delivery, s string) bool {
	return slices.ContainsFunc(ds, func(d delivery) bool { return strings.Contains(d.subject, s) })
}

// TestMailExactlyOnceAcrossFailovers runs jobs that ask for every kind of
// notification on 3 voters and a node, with a mail program and a webhook,
// and kills the leader (SIGKILL) three times: after a job's BEGIN was
// delivered, between two time-limit warnings of a running job, and while
// the mail program is delivering a notice. Every event is delivered to
// both sinks under one key; the only repeat is the one the last kill
// forced, which comes under the same key with attempt 2 (docs/mail.md).
func TestMailExactlyOnceAcrossFailovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes and waits out a 20 s time limit")
	}
	m := newMailSinks(t)
	c := startControllers(t, 3)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "12", "--mem", "4G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, c.addr, work, "config", "set", "MailProg="+filepath.Join(m.dir, "mailprog"), "MailWebhook="+m.hook.URL+"/hook"); err != nil {
		t.Fatal(err)
	}
	script := func(name, body string) string {
		p := filepath.Join(work, name+".sh")
		writeFile(t, p, "#!/bin/sh\n"+body+"\n")
		return p
	}
	submit := func(name string, args ...string) uint64 {
		return submitParsable(t, c.addr, work, append(append([]string{"-J", name, "-o", "/dev/null"}, args...), script(name, "sleep 1"))...)
	}
	// One job per kind of event.
	begins := submit("begins", "--mail-type=BEGIN,END", "--mail-user=alice@example.org")
	fails := submitParsable(t, c.addr, work, "-J", "fails", "-o", "/dev/null", "--mail-type=FAIL", script("fails", "exit 3"))
	timeout := submitParsable(t, c.addr, work, "-J", "timeout", "-o", "/dev/null", "-t", "0:20",
		"--mail-type=TIME_LIMIT,TIME_LIMIT_50,TIME_LIMIT_80,TIME_LIMIT_90", script("timeout", "sleep 120"))
	requeued := submitParsable(t, c.addr, work, "-J", "requeued", "-o", "/dev/null", "--requeue", "--mail-type=REQUEUE",
		script("requeued", "if [ -e "+work+"/ran ]; then exit 0; fi; touch "+work+"/ran; sleep 60"))
	baddep := submit("baddep", "--mail-type=INVALID_DEPEND", "--dependency=afterok:"+idText(fails))
	submit("tasks", "--array=0-2", "--mail-type=END,ARRAY_TASKS")
	summary := submit("summary", "--array=0-1", "--mail-type=BEGIN,END")
	submit("all", "--mail-type=ALL")

	// Kill 1: once the first BEGIN is delivered.
	waitFor(t, c, "the first BEGIN delivered", 30*time.Second, func() bool { return has(m.webhook(), "Name=begins Began") })
	killLeader(t, c)
	waitFor(t, c, "requeued job running", 30*time.Second, func() bool {
		// Consistent: a member just restarted may not have caught up.
		j, err := c.client(t).Job(context.Background(), requeued, true)
		return err == nil && j.State == api.StateRunning
	})
	if _, err := cli(t, c.addr, work, "requeue", idText(requeued)); err != nil {
		t.Fatal(err)
	}
	// Kill 2: between the timing-out job's 50 % and 80 % warnings.
	waitFor(t, c, "the 50 % warning", 40*time.Second, func() bool { return has(m.webhook(), "Name=timeout Reached 50%") })
	if has(m.webhook(), "Name=timeout Reached 80%") {
		t.Log("the 80 % warning came before the kill meant for the gap; the kill still tests a failover")
	}
	killLeader(t, c)
	// Kill 3: while the mail program delivers the blocker's END.
	submit("blocker", "--mail-type=END")
	waitFor(t, c, "the blocker's mail in flight", 30*time.Second, func() bool { return fileExists(m.inflight) })
	killLeader(t, c)
	waitFor(t, c, "the blocker's END redelivered", 30*time.Second, func() bool { return has(m.mailed(t), "Name=blocker Ended") })
	writeFile(t, m.release, "")
	if _, err := cli(t, c.addr, work, "cancel", idText(baddep)); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{ // subject part → deliveries expected (distinct keys)
		"Job_id=" + idText(begins) + " Name=begins Began": 1,
		"Name=begins Ended": 1,
		"Job_id=" + idText(fails) + " Name=fails Failed, Run time": 1,
		"Name=timeout Reached 50% of time limit":                   1,
		"Name=timeout Reached 80% of time limit":                   1,
		"Name=timeout Reached 90% of time limit":                   1,
		"Name=timeout Reached time limit":                          1,
		"Name=requeued Requeued":                                   1,
		"Name=baddep Invalid dependency":                           1,
		"Name=tasks Ended":                                         3,
		"Slurm Array Summary Job_id=" + idText(summary) + "_* (" + idText(summary) + ") Name=summary Began": 1,
		"Name=summary Ended, COMPLETED, ExitCode [0-0]":                                                     1,
		"Name=all Began":     1,
		"Name=all Ended":     1,
		"Name=blocker Ended": 1,
	}
	total := 0
	for _, n := range want {
		total += n
	}
	waitFor(t, c, "every notice on both sinks", 60*time.Second, func() bool {
		return len(keysOf(m.webhook())) >= total && len(keysOf(m.mailed(t))) >= total && fileExists(m.release) && countMatching(m.mailed(t), "Name=blocker") >= 2
	})
	time.Sleep(2 * time.Second) // a late repeat would show by now
	for sink, got := range map[string][]delivery{"mail program": m.mailed(t), "webhook": m.webhook()} {
		checkOnce(t, sink, got, want)
	}
	blocker := filterSubject(m.mailed(t), "Name=blocker")
	if len(blocker) != 2 || blocker[0].key != blocker[1].key || blocker[0].attempt+blocker[1].attempt != 3 {
		t.Errorf("the mail program ran the blocker's notice %+v; want attempt 2 and then the released attempt 1, under one key", blocker)
	}
	if hooked := filterSubject(m.webhook(), "Name=blocker"); len(hooked) != 1 || hooked[0].attempt != 2 {
		t.Errorf("the webhook got the blocker's notice %+v; want it once, from the next leader (attempt 2)", hooked)
	}
	if d := filterSubject(m.mailed(t), "Name=begins Began"); len(d) == 0 || d[0].to != "alice@example.org" {
		t.Errorf("begins' notice went to %+v, want alice@example.org", d)
	}
	_ = timeout
}

// killLeader SIGKILLs the leading controller, waits for another to lead
// and restarts the killed one.
func killLeader(t *testing.T, c *cluster) {
	t.Helper()
	lead := c.leader(t, 15*time.Second)
	c.ctlds[lead].kill(syscall.SIGKILL)
	for {
		i := c.leader(t, 15*time.Second)
		if i != lead {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.ctlds[lead].start(t)
}

// waitFor polls cond every 100 ms for up to d.
func waitFor(t *testing.T, c *cluster, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range append(c.ctlds, c.nodeds...) {
				t.Logf("%s log:\n%s", p.name, p.tail())
			}
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func keysOf(ds []delivery) map[string]bool {
	keys := map[string]bool{}
	for _, d := range ds {
		keys[d.key] = true
	}
	return keys
}

func countMatching(ds []delivery, s string) int { return len(filterSubject(ds, s)) }

func filterSubject(ds []delivery, s string) []delivery {
	var out []delivery
	for _, d := range ds {
		if strings.Contains(d.subject, s) {
			out = append(out, d)
		}
	}
	return out
}

// checkOnce checks one sink's deliveries: each expected subject under as
// many distinct keys as want says, nothing unexpected, and a key
// delivered more than once only as a repeat a later leader flagged
// (attempts that differ, one of them above 1).
func checkOnce(t *testing.T, sink string, got []delivery, want map[string]int) {
	t.Helper()
	byKey := map[string][]delivery{}
	for _, d := range got {
		byKey[d.key] = append(byKey[d.key], d)
	}
	repeated := 0
	for key, ds := range byKey {
		if len(ds) == 1 {
			continue
		}
		// A kill can cut short the deliveries in flight (a few at a
		// time): each is repeated once by the next leader, no more.
		if repeated++; len(ds) > 2 || repeated > 6 {
			t.Errorf("%s: key %s delivered %d times (%d keys repeated): more than the three kills explain", sink, key, len(ds), repeated)
		}
		attempts := map[int]bool{}
		for _, d := range ds {
			if d.subject != ds[0].subject || attempts[d.attempt] {
				t.Errorf("%s: key %s delivered as %+v: a repeat with the same attempt, or another notice under the key", sink, key, ds)
			}
			attempts[d.attempt] = true
		}
	}
	for part, n := range want {
		keys := 0
		for _, ds := range byKey {
			if strings.Contains(ds[0].subject, part) {
				keys++
			}
		}
		if keys != n {
			t.Errorf("%s: %d notices say %q, want %d", sink, keys, part, n)
		}
	}
	if len(byKey) != sumValues(want) {
		var all []string
		for _, ds := range byKey {
			all = append(all, fmt.Sprintf("%s (attempts %d)", ds[0].subject, len(ds)))
		}
		slices.Sort(all)
		t.Errorf("%s: %d distinct notices, want %d:\n%s", sink, len(byKey), sumValues(want), strings.Join(all, "\n"))
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
