package noded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"corral/api"
)

// healthLoop runs the node's health check at start and every
// HealthInterval, and reports each result to the controllers, which drain
// the node while it fails and resume it once it passes (if the check
// drained it). A report that does not get through is sent again with the
// next result; the controllers act only on a change.
func (d *Daemon) healthLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.HealthInterval)
	defer t.Stop()
	last := ""
	for {
		h := runHealthCheck(ctx, d.cfg.HealthCheck, d.cfg.HealthTimeout)
		if ctx.Err() != nil {
			return
		}
		if said := fmt.Sprint(h.OK, h.Output); said != last {
			if h.OK {
				d.log.Info("health check passes", "program", d.cfg.HealthCheck)
			} else {
				d.log.Warn("health check fails: the controllers drain the node", "program", d.cfg.HealthCheck, "output", h.Output)
			}
			last = said
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := d.cfg.Client.Report(cctx, api.NodeStatus{Name: d.cfg.Name, BootID: d.bootID, Health: &h})
		cancel()
		if err != nil && ctx.Err() == nil {
			d.log.Warn("cannot report the health check's result; it goes with the next one", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runHealthCheck runs program once, bounded by timeout: it passes when it
// exits 0. Its output (stdout and stderr, lines joined with "; ") says
// why it failed; one that printed nothing gets its exit status or its
// timeout as the reason.
func runHealthCheck(ctx context.Context, program string, timeout time.Duration) api.HealthReport {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, program)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	text := strings.Join(strings.Fields(strings.ReplaceAll(out.String(), "\n", " ; ")), " ")
	text = strings.Trim(strings.ReplaceAll(text, " ;", ";"), "; ")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return api.HealthReport{OK: true, Output: clipHealth(text)}
	case cctx.Err() != nil && ctx.Err() == nil:
		text = strings.TrimSpace(fmt.Sprintf("%s (timed out after %v)", text, timeout))
	case text == "" && errors.As(err, &exit):
		text = fmt.Sprintf("%s exited with status %d", program, exit.ExitCode())
	case text == "":
		text = fmt.Sprintf("%s could not run: %v", program, err)
	}
	return api.HealthReport{OK: false, Output: clipHealth(text)}
}

// clipHealth keeps a health check's output within what a report carries.
func clipHealth(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= api.MaxHealthOutput {
		return s
	}
	cut := api.MaxHealthOutput - 4
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + " ..."
}
