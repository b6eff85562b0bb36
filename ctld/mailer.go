package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// The leader delivers job notifications (sbatch --mail-type) from the
// replicated outbox (ctld/state/mail.go). For each batch it first commits a
// claim (ClaimNotices), then runs the mail program and POSTs to the webhook,
// then commits what was delivered (NoticesDone). A member that is not the
// leader never delivers, and a deposed leader cannot commit its claim, so it
// delivers nothing new. A leader that dies between a delivery and its mark
// leaves the notice claimed but not done: the next leader delivers it again,
// with the same idempotency key and a higher attempt count, so a receiver
// can drop the repeat. docs/mail.md says why that window cannot be closed
// from this side.
const (
	// mailBatch bounds the notices one claim covers, mailParallel the
	// deliveries in flight at once.
	mailBatch    = 64
	mailParallel = 4
	// mailProgTimeout bounds one run of the mail program, webhookTimeout
	// one POST.
	mailProgTimeout = 60 * time.Second
	webhookTimeout  = 10 * time.Second
	// A notice that still fails after mailGiveUp is given up (logged as an
	// error); the waits between tries grow from mailRetryMin to
	// mailRetryMax.
	mailGiveUp   = 24 * time.Hour
	mailRetryMin = time.Second
	mailRetryMax = 5 * time.Minute
	// mailOutputLimit bounds what is kept of a failing program's output
	// for the log.
	mailOutputLimit = 2048
)

// mailer is the leader's delivery state: when each failed notice may be
// tried again. It lives as long as one term of leadership.
type mailer struct {
	c      *Controller
	client *http.Client
	retry  map[uint64]time.Time
	// noDefault is set once the default mail program was found missing,
	// so that is said once per term.
	noDefault atomic.Bool
}

func (c *Controller) mailLoop(ctx context.Context) {
	m := &mailer{c: c, retry: map[uint64]time.Time{}, client: &http.Client{
		Timeout: webhookTimeout,
		// A redirect is an answer the receiver did not mean as success.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	wait := c.clock.NewTimer(time.Hour)
	defer wait.Stop()
	for ctx.Err() == nil {
		next := m.round(ctx)
		if !next.IsZero() && next.Sub(c.clock.Now()) <= 0 {
			continue
		}
		d := time.Hour
		if !next.IsZero() {
			d = next.Sub(c.clock.Now())
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-c.fsm.Notices:
		case <-wait.C():
		}
	}
}

// round delivers one batch of the notices due now and returns when the
// next one falls due: now for more of the outbox, the earliest retry, or
// zero when the outbox is empty.
func (m *mailer) round(ctx context.Context) time.Time {
	now := m.c.clock.Now()
	var batch []state.Notice
	var cfg api.SchedConfig
	var next time.Time
	m.c.fsm.Read(func(s *state.State) {
		cfg = s.Config
		s.EachNotice(func(n *state.Notice) bool {
			if at, ok := m.retry[n.ID]; ok && now.Before(at) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				return true
			}
			batch = append(batch, *n)
			return len(batch) < mailBatch
		})
	})
	if len(batch) == 0 {
		return next
	}
	ids := make([]uint64, len(batch))
	for i, n := range batch {
		ids[i] = n.ID
	}
	res, err := m.c.propose(state.CmdClaimNotices, &state.ClaimNotices{Now: now.UTC(), IDs: ids, By: m.c.cfg.ID})
	if err != nil {
		m.c.log.Warn("claiming job notifications failed; trying again", "err", err)
		return now.Add(mailRetryMin)
	}
	claimed, _ := res.([]uint64)
	marks := m.deliver(ctx, batch, claimed, cfg, now)
	if ctx.Err() != nil {
		return time.Time{}
	}
	if len(marks) > 0 {
		if _, err := m.c.propose(state.CmdNoticesDone, &state.NoticesDone{Now: m.c.clock.Now().UTC(), Marks: marks}); err != nil {
			m.c.log.Warn("recording delivered job notifications failed; the next leader delivers them again, with the same keys", "err", err)
		}
	}
	return now
}

// deliver delivers the claimed notices of batch to their sinks not done
// yet, mailParallel at a time, and returns the marks to commit.
func (m *mailer) deliver(ctx context.Context, batch []state.Notice, claimed []uint64, cfg api.SchedConfig, now time.Time) []state.NoticeMark {
	ok := map[uint64]bool{}
	for _, id := range claimed {
		ok[id] = true
	}
	var mu sync.Mutex
	var marks []state.NoticeMark
	sem := make(chan struct{}, mailParallel)
	var wg sync.WaitGroup
	for i := range batch {
		n := &batch[i]
		if !ok[n.ID] {
			continue
		}
		n.Attempts++ // as the claim just made it
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			done, failed := m.deliverOne(ctx, n, cfg)
			mu.Lock()
			defer mu.Unlock()
			if failed == 0 {
				delete(m.retry, n.ID)
			} else if now.Sub(n.Time) >= mailGiveUp {
				m.c.log.Error("giving up a job notification that kept failing", "job", n.Ref, "event", n.Event, "key", n.Key(), "since", n.Time)
				done |= failed
			} else {
				m.retry[n.ID] = now.Add(retryWait(n.Attempts))
			}
			if done != 0 {
				marks = append(marks, state.NoticeMark{ID: n.ID, Sinks: done, Failed: done&failed != 0})
			}
		}()
	}
	wg.Wait()
	return marks
}

// retryWait is how long to wait after the attempt-th failed try.
func retryWait(attempt int) time.Duration {
	d := mailRetryMin
	for i := 1; i < attempt && d < mailRetryMax; i++ {
		d *= 2
	}
	return min(d, mailRetryMax)
}

// deliverOne delivers notice n to each sink it has not reached, and returns
// the sinks reached (or with nothing to reach) and those that failed.
func (m *mailer) deliverOne(ctx context.Context, n *state.Notice, cfg api.SchedConfig) (done, failed uint8) {
	todo := n.Sinks &^ n.Done
	if todo&state.SinkMailProg != 0 {
		switch err := m.runMailProg(ctx, n, cfg.MailProg); {
		case errors.Is(err, errNoDefaultMailProg):
			done |= state.SinkMailProg
		case err != nil:
			failed |= state.SinkMailProg
			m.c.log.Warn("the mail program failed; trying again later", "job", n.Ref, "event", n.Event, "key", n.Key(), "attempt", n.Attempts, "err", err)
		default:
			done |= state.SinkMailProg
			m.c.log.Debug("mailed a job notification", "job", n.Ref, "event", n.Event, "to", n.To, "key", n.Key(), "attempt", n.Attempts)
		}
	}
	if todo&state.SinkWebhook != 0 {
		if err := m.post(ctx, n, cfg.MailWebhook); err != nil {
			failed |= state.SinkWebhook
			m.c.log.Warn("the notification webhook failed; trying again later", "job", n.Ref, "event", n.Event, "key", n.Key(), "attempt", n.Attempts, "err", err)
		} else {
			done |= state.SinkWebhook
		}
	}
	return done, failed
}

// errNoDefaultMailProg: MailProg is unset and this controller has no
// /usr/bin/mail; the notice goes to the webhook only.
var errNoDefaultMailProg = errors.New("no default mail program")

// runMailProg runs the mail program for notice n as Slurm does,
// PROG -s SUBJECT RECIPIENT, with Slurm's SLURM_JOB_* variables and the
// notice's key in its environment and a short body on its standard input.
func (m *mailer) runMailProg(ctx context.Context, n *state.Notice, prog string) error {
	if prog == "" {
		prog = api.DefaultMailProg
		if _, err := os.Stat(prog); errors.Is(err, fs.ErrNotExist) {
			if m.noDefault.CompareAndSwap(false, true) {
				m.c.log.Info("no mail program: MailProg is unset and this controller has no " + prog + "; job notifications go to the webhook, if one is set")
			}
			return errNoDefaultMailProg
		}
	}
	if why := mailProgProblem(prog); why != "" {
		return fmt.Errorf("MailProg %s %s", prog, why)
	}
	ctx, cancel := context.WithTimeout(ctx, mailProgTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "-s", n.Subject, n.To)
	cmd.Env = mailEnv(n)
	cmd.Stdin = bytes.NewReader(mailBody(n))
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, killed whole on a timeout or when this
	// member stops leading: a mail program's children go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (output: %q)", prog, err, out.String())
	}
	return nil
}

// mailProgProblem says why the controller will not run prog, or "": it must
// be a regular executable file that only its owner, root or the user the
// controller runs as, may change. The setting is replicated, so this keeps
// an administrator of the cluster from running a program of anyone's
// choosing on every controller.
func mailProgProblem(prog string) string {
	st, err := os.Stat(prog)
	if err != nil {
		return err.Error()
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "is not an executable file"
	}
	if st.Mode().Perm()&0o022 != 0 {
		return "may be changed by others than its owner (its mode is " + st.Mode().Perm().String() + "); remove group and other write permission"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return "is owned by uid " + strconv.Itoa(int(sys.Uid)) + ", neither root nor the user this controller runs as"
	}
	return ""
}

// mailEnv is the mail program's environment: a plain PATH, Slurm's
// variables for the event and corral's key and attempt.
func mailEnv(n *state.Notice) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SLURM_JOB_ID=" + strconv.FormatUint(n.Job, 10),
		"SLURM_JOB_NAME=" + n.Name,
		"SLURM_JOB_USER=" + n.User,
		"SLURM_JOB_STATE=" + string(n.State),
		"SLURM_JOB_MAIL_TYPE=" + state.MailTypeText(n.Event),
		"CORRAL_MAIL_KEY=" + n.Key(),
		"CORRAL_MAIL_ATTEMPT=" + strconv.Itoa(n.Attempts),
		"CORRAL_MAIL_EVENT=" + n.Event,
	}
	if n.ArrayJob != 0 {
		env = append(env, "SLURM_ARRAY_JOB_ID="+strconv.FormatUint(n.ArrayJob, 10))
	}
	switch n.Event {
	case api.MailBegin:
		env = append(env, "SLURM_JOB_QUEUED_TIME="+state.SlurmDuration(n.QueuedS))
	case api.MailEnd, api.MailFail:
		env = append(env, "SLURM_JOB_RUN_TIME="+state.SlurmDuration(n.RunS), "SLURM_JOB_EXIT_CODE_MAX="+strconv.Itoa(n.ExitCode))
	case api.MailRequeue, api.MailTimeLimit, api.MailTimeLimit50, api.MailTimeLimit80, api.MailTimeLimit90:
		env = append(env, "SLURM_JOB_RUN_TIME="+state.SlurmDuration(n.RunS))
	}
	return env
}

// mailBody is the message's text: the subject again, and the key, so that
// a repeat (Attempt above 1) can be recognised in a mailbox as well.
func mailBody(n *state.Notice) []byte {
	body := n.Subject + "\n\nIdempotency-Key: " + n.Key() + "\n"
	if n.Attempts > 1 {
		body += "Attempt: " + strconv.Itoa(n.Attempts) + " (an earlier attempt may have been delivered)\n"
	}
	return []byte(body)
}

// post sends notice n to the webhook as JSON; any 2xx answer delivers it.
func (m *mailer) post(ctx context.Context, n *state.Notice, url string) error {
	body, err := json.Marshal(webhookBody(n))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.Key())
	req.Header.Set("User-Agent", "corral-ctld")
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", api.RedactURL(url), resp.Status)
	}
	return nil
}

func webhookBody(n *state.Notice) api.MailNotice {
	return api.MailNotice{
		Key: n.Key(), Attempt: n.Attempts, Event: n.Event, MailType: state.MailTypeText(n.Event), Subject: n.Subject,
		Recipient: n.To, User: n.User, JobID: n.Job, ArrayJobID: n.ArrayJob, Job: n.Ref, Name: n.Name,
		State: string(n.State), ExitCode: n.ExitCode, QueuedS: n.QueuedS, RunS: n.RunS, Time: n.Time.UTC(),
	}
}

// limitedBuffer keeps the first mailOutputLimit bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := mailOutputLimit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// mailTimerLoop proposes the time-limit warnings (TIME_LIMIT_50/80/90) of
// running jobs as their runs reach them; the apply checks each again.
func (c *Controller) mailTimerLoop(ctx context.Context) {
	t := c.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := c.clock.Now().UTC()
		var due []uint64
		c.fsm.Read(func(s *state.State) { due, _ = s.TimeWarningsDue(now) })
		if len(due) == 0 {
			continue
		}
		if _, err := c.propose(state.CmdMailTimeEvents, &state.MailTimeEvents{Now: now, Jobs: due}); err != nil {
			c.log.Warn("recording time-limit warnings failed; trying again", "err", err)
		}
	}
}
