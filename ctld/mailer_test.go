package ctld

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// mailScript writes a mail program that appends one line per run to log:
// its key, attempt, arguments, SLURM_JOB_MAIL_TYPE and the body's key
// line, separated by "|". With block set it first appends "start|KEY|N"
// and waits for the file release to exist.
func mailScript(t *testing.T, dir, log string, block string) string {
	t.Helper()
	prog := filepath.Join(dir, "mailprog")
	wait := ""
	if block != "" {
		wait = `echo "start|$CORRAL_MAIL_KEY|$CORRAL_MAIL_ATTEMPT" >> ` + log + `
i=0
while [ ! -e ` + block + ` ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
`
	}
	script := "#!/bin/sh\nbody=$(cat)\n" + wait +
		`printf '%s|%s|%s|%s|%s|%s|%s\n' "$CORRAL_MAIL_KEY" "$CORRAL_MAIL_ATTEMPT" "$1" "$2" "$3" "$SLURM_JOB_MAIL_TYPE" "$(echo "$body" | grep Idempotency-Key)" >> ` + log + "\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog
}

// lines reads a log's lines; none when it does not exist yet.
func lines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// hookServer is a webhook receiver that records what it is sent.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	got  []api.MailNotice
	keys []string // the Idempotency-Key headers
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n api.MailNotice
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&n) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got, h.keys = append(h.got, n), append(h.keys, r.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) notices() ([]api.MailNotice, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got), slices.Clone(h.keys)
}

// outboxEmpty reports whether every member's outbox is empty.
func outboxEmpty(tc *testCluster) bool {
	for _, c := range tc.ctls {
		n := 0
		c.FSM().Read(func(s *state.State) { n = len(s.Notices) })
		if n != 0 {
			return false
		}
	}
	return true
}

// TestMailDeliveredByTheLeader runs a job that asks for BEGIN and END on a
// 3-voter cluster with a mail program and a webhook: each notice reaches
// both once, with Slurm's arguments and subject lines, the same key in
// the program's environment, the body, the webhook's header and its JSON,
// and the outbox empties on every member.
func TestMailDeliveredByTheLeader(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	log := filepath.Join(dir, "mail.log")
	hook := newHookServer(t)
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{
		{"MailProg", mailScript(t, dir, log, "")}, {"MailWebhook", hook.URL + "/notify?token=secret"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	sp := spec("mailed")
	sp.MailType, sp.MailUser = []string{api.MailBegin, api.MailEnd}, "bob@example.org"
	res, err := cl.Submit(ctx, []api.JobSpec{sp})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, res[0].JobID, api.StateCompleted)
	eventually(t, "both notices mailed and posted", func() bool {
		got, _ := hook.notices()
		return len(lines(log)) >= 2 && len(got) >= 2 && outboxEmpty(tc)
	})
	time.Sleep(200 * time.Millisecond) // a second delivery would show by now
	mailed := lines(log)
	got, keys := hook.notices()
	if len(mailed) != 2 || len(got) != 2 {
		t.Fatalf("mailed %d times and posted %d times, want 2 each:\n%s\n%+v", len(mailed), len(got), strings.Join(mailed, "\n"), got)
	}
	wantSubjects := []string{"Slurm Job_id=1 Name=mailed Began, Queued time 00:00:0", "Slurm Job_id=1 Name=mailed Ended, Run time 00:00:0"}
	for i, line := range mailed {
		f := strings.Split(line, "|")
		if len(f) != 7 {
			t.Fatalf("mail program line %q", line)
		}
		key, attempt, dashS, subject, to, kind, bodyKey := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
		if attempt != "1" || dashS != "-s" || to != "bob@example.org" || !strings.HasPrefix(subject, wantSubjects[i]) || bodyKey != "Idempotency-Key: "+key {
			t.Errorf("mail %d: key %s attempt %s args %q %q %q body %q", i, key, attempt, dashS, subject, to, bodyKey)
		}
		if want := []string{"Began", "Ended"}[i]; kind != want {
			t.Errorf("mail %d: SLURM_JOB_MAIL_TYPE %q, want %q", i, kind, want)
		}
		if got[i].Key != key || keys[i] != key || got[i].Subject != subject || got[i].Attempt != 1 || got[i].JobID != 1 || got[i].Recipient != "bob@example.org" {
			t.Errorf("webhook %d: %+v (header key %s); the program had key %s subject %q", i, got[i], keys[i], key, subject)
		}
	}
	if strings.HasSuffix(mailed[1], "COMPLETED, ExitCode 0") {
		t.Logf("end: %s", mailed[1])
	} else if !strings.Contains(mailed[1], "COMPLETED, ExitCode 0") {
		t.Errorf("the end notice %q does not say COMPLETED, ExitCode 0", mailed[1])
	}
	if strings.Split(mailed[0], "|")[0] == strings.Split(mailed[1], "|")[0] {
		t.Errorf("two notices share a key: %s", mailed[0])
	}
	// The webhook's secret path is not shown to users.
	pv, err := cl.Policy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pv.Config.MailWebhook, "secret") {
		t.Errorf("the policy view shows the webhook URL %q", pv.Config.MailWebhook)
	}
}

// TestMailRedeliveredAfterTheLeaderStops stops the leader while its mail
// program delivers a notice: the program is stopped with it, and the next
// leader delivers the notice again under the same key with attempt 2. The
// notice is delivered to completion once.
func TestMailRedeliveredAfterTheLeaderStops(t *testing.T) {
	tc := startCluster(t, 3)
	lead := tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	log, release := filepath.Join(dir, "mail.log"), filepath.Join(dir, "release")
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MailProg", mailScript(t, dir, log, release)}}}); err != nil {
		t.Fatal(err)
	}
	sp := spec("held")
	sp.MailType, sp.Hold = []string{api.MailEnd}, true
	res, err := cl.Submit(ctx, []api.JobSpec{sp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{res[0].JobID}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader's mail program started", func() bool { return len(lines(log)) == 1 })
	for i, c := range tc.ctls {
		if c == lead {
			tc.cancels[i]()
			err := <-tc.done[i]
			tc.done[i] <- err // for the cleanup's stop
		}
	}
	eventually(t, "the next leader's mail program started", func() bool { return len(lines(log)) == 2 })
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the notice delivered", func() bool { return len(lines(log)) == 3 })
	time.Sleep(300 * time.Millisecond)
	got := lines(log)
	first, second, done := strings.Split(got[0], "|"), strings.Split(got[1], "|"), strings.Split(got[2], "|")
	if len(got) != 3 || first[1] != second[1] || first[2] != "1" || second[2] != "2" || done[0] != first[1] || done[1] != "2" {
		t.Fatalf("mail program runs:\n%s\nwant a start with attempt 1, one with attempt 2 under the same key, then one delivery", strings.Join(got, "\n"))
	}
	if !strings.Contains(got[2], "Slurm Job_id=1 Name=held Ended, CANCELLED, ExitCode 0") {
		t.Errorf("delivered %q", got[2])
	}
}

// TestTimeLimitWarnings drives a running job's clock past 50, 80 and 90 %
// of its limit with a fake clock: each warning is mailed once, in order,
// with the run time it was reached at.
func TestTimeLimitWarnings(t *testing.T) {
	clock := newFakeClock(t0)
	addr := freeAddr(t)
	c, err := New(Config{ID: "c1", RaftAddr: addr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "c1"),
		Peers: []Peer{{ID: "c1", Addr: addr}}, Logger: quietLog(), NodeTimeout: time.Hour, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for !c.isLeading() {
		time.Sleep(10 * time.Millisecond)
	}
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	dir := t.TempDir()
	log := filepath.Join(dir, "mail.log")
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MailProg", mailScript(t, dir, log, "")}}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 1, MemMB: 1024, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	sp := spec("long")
	sp.TimeLimit = 100
	sp.MailType = []string{api.MailTimeLimit90, api.MailTimeLimit80, api.MailTimeLimit50}
	res, err := cl.Submit(ctx, []api.JobSpec{sp})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, res[0].JobID, api.StateRunning)
	for range 45 {
		clock.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(lines(log)); n != 0 {
		t.Fatalf("%d warnings mailed at 45 s of a 100 s limit", n)
	}
	eventually(t, "three warnings", func() bool {
		clock.Advance(time.Second)
		return len(lines(log)) >= 3
	})
	got := lines(log)
	want := []string{"Reached 50% of time limit, Run time 00:00:5", "Reached 80% of time limit, Run time 00:01:2", "Reached 90% of time limit, Run time 00:01:3"}
	for i, line := range got {
		if i >= len(want) || !strings.Contains(line, want[i]) {
			t.Errorf("warning %d: %q, want one with %q", i, line, want[min(i, len(want)-1)])
		}
	}
}
