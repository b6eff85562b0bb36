package noded

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"corral/api"
	"corral/internal/pki"
)

// The stream between two node daemons. The source's daemon connects to the
// destination's job API (POST /v1/migrations/{id}/stream, upgraded to
// MigrationUpgrade), shows the migration's token and, with TLS, its node
// certificate; the destination takes the stream only for a run of its own
// that waits for that migration, from that migration's source node. Then,
// on the raw connection: the source's prelude (4 bytes of length, the
// bytes), then QEMU's stream to the end. QEMU itself listens on nothing
// and connects nowhere: each side's QEMU has one end of a socket pair
// the daemon copies to and from this connection, so the stream is as
// authenticated and encrypted as the cluster's TLS makes the job API, and
// a guest reaches nothing new.

// MigrationUpgrade is the Upgrade protocol of a migration stream.
const MigrationUpgrade = "corral-migration/1"

// migrationTokenHeader carries the migration's token.
const migrationTokenHeader = "Corral-Migration-Token"

// maxPrelude bounds a prelude.
const maxPrelude = 1 << 20

// liveMigration is what the job API knows of a run waiting for a
// migration's stream (a copy the loop publishes).
type liveMigration struct {
	id          uint64
	token, peer string
	// claimed is set by the first stream that passed the checks: a VM
	// takes one stream.
	claimed *sync.Once
}

// streamOut connects to m's destination, sends src's prelude, reports the
// stream begun and sends QEMU's stream; it returns QEMU's figures once the
// stream completed.
func (d *Daemon) streamOut(ctx context.Context, alloc uint64, src MigrationSource, m api.AllocMigration, p MigrationParams) (MigrationStats, error) {
	conn, err := d.dialMigration(ctx, m)
	if err != nil {
		return MigrationStats{}, fmt.Errorf("connecting to the destination %s: %w", m.Peer, err)
	}
	defer conn.Close()
	pre, err := src.MigrationPrelude()
	if err == nil {
		err = writePrelude(conn, pre)
	}
	if err != nil {
		return MigrationStats{}, fmt.Errorf("the stream's prelude: %w", err)
	}
	d.migRep.add(api.MigrationReport{Migration: m.ID, Alloc: alloc, Event: "streaming"})
	return src.MigrateOut(ctx, conn, p)
}

// dialMigration opens the upgraded connection to m's destination's job
// API; with TLS it shows this node's certificate and takes only m.Peer's.
func (d *Daemon) dialMigration(ctx context.Context, m api.AllocMigration) (net.Conn, error) {
	u, err := url.Parse(m.PeerAddr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("the destination's job API %q is not an http(s) URL", m.PeerAddr)
	}
	var dialer net.Dialer
	raw, err := dialer.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	conn := raw
	if u.Scheme == "https" {
		cfg, err := d.cfg.TLS.Client()
		if err != nil {
			raw.Close()
			return nil, err
		}
		cfg.ServerName = u.Hostname()
		cfg.VerifyConnection = nodeNamed(m.Peer)
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		conn = tc
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, _ := http.NewRequest(http.MethodPost, u.JoinPath("v1", "migrations", strconv.FormatUint(m.ID, 10), "stream").String(), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", MigrationUpgrade)
	req.Header.Set(migrationTokenHeader, m.Token)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		conn.Close()
		return nil, fmt.Errorf("the destination answered %s: %s", resp.Status, body)
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// nodeNamed returns a VerifyConnection check that takes only the node
// certificate of node name.
func nodeNamed(name string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		id, ok := pki.PeerIdentity(&cs)
		if !ok || id.Role != pki.RoleNode || id.Name != name {
			return fmt.Errorf("the peer's certificate is not node %s's (it is %s %s)", name, id.Role, id.Name)
		}
		return nil
	}
}

// bufferedConn reads through the reader that read the upgrade's answer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite ends the writing half, so that the destination sees the end
// of the stream.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func writePrelude(w io.Writer, pre []byte) error {
	if len(pre) > maxPrelude {
		return fmt.Errorf("a prelude of %d bytes (at most %d)", len(pre), maxPrelude)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(pre)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(pre)
	return err
}

// readPrelude reads what writePrelude wrote.
func readPrelude(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxPrelude {
		return nil, fmt.Errorf("a prelude of %d bytes (at most %d)", size, maxPrelude)
	}
	pre := make([]byte, size)
	_, err := io.ReadFull(r, pre)
	return pre, err
}

// handleMigrationStream takes a migration's stream for the run of this
// node that waits for it, and feeds it to the run's VM.
func (d *Daemon) handleMigrationStream(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeAPIError(w, refuse(http.StatusBadRequest, "migration id %q is not a number", r.PathValue("id")))
		return
	}
	run, mig := d.waitingFor(id)
	switch {
	case mig == nil || mig.token == "" || mig.claimed == nil:
		// A run re-adopted by this daemon waits for no stream: the one
		// it waited for died with the daemon that received it.
		err = refuse(http.StatusNotFound, "no run of node %s waits for migration %d's stream", d.cfg.Name, id)
	case subtle.ConstantTimeCompare([]byte(r.Header.Get(migrationTokenHeader)), []byte(mig.token)) != 1:
		err = refuse(http.StatusForbidden, "migration %d: wrong token", id)
	case r.TLS != nil && nodeNamed(mig.peer)(*r.TLS) != nil:
		err = refuse(http.StatusForbidden, "migration %d: only its source node %s may stream it", id, mig.peer)
	case !upgradeTo(r, MigrationUpgrade):
		err = refuse(http.StatusBadRequest, "a migration stream needs Connection: Upgrade and Upgrade: %s", MigrationUpgrade)
	}
	var dst MigrationDestination
	if err == nil {
		var ok bool
		if dst, ok = run.handle.(MigrationDestination); !ok {
			err = refuse(http.StatusConflict, "job %d's run cannot take a migration stream", run.job.ID)
		}
	}
	claimed := false
	if err == nil {
		mig.claimed.Do(func() { claimed = true })
		if !claimed {
			err = refuse(http.StatusConflict, "migration %d has its stream already", id)
		}
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeAPIError(w, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + MigrationUpgrade + "\r\n\r\n")
	brw.Flush()
	stream := &bufferedConn{Conn: conn, r: brw.Reader}
	d.log.Info("taking a migration's stream", "job", run.job.ID, "migration", id, "from", mig.peer)
	pre, err := readPrelude(stream)
	if err == nil {
		err = dst.Receive(context.Background(), pre, stream)
	}
	select {
	case d.migCh <- migReceived{key: jobKey{run.job.ID, run.job.StartIndex}, id: id, err: err}:
	case <-d.loopDone:
	}
}

// waitingFor returns the published run waiting for migration id's stream.
func (d *Daemon) waitingFor(id uint64) (*liveRun, *liveMigration) {
	for _, run := range *d.runs.Load() {
		if run.incoming != nil && run.incoming.id == id {
			return run, run.incoming
		}
	}
	return nil, nil
}

// migReporter sends the node's migration reports as soon as they exist,
// retried until a controller takes them. They are not kept on disk: a
// restarted daemon learns from its runs where their migrations stand
// (recoverMigration), and an event reported twice changes nothing.
type migReporter struct {
	d       *Daemon
	mu      sync.Mutex
	pending []api.MigrationReport
	// checkpoints are the checkpoint reports, sent the same way
	// (checkpoint.go).
	checkpoints []api.CheckpointReport
	notify      chan struct{}
}

func newMigReporter(d *Daemon) *migReporter {
	return &migReporter{d: d, notify: make(chan struct{}, 1)}
}

// add queues a report; it never blocks.
func (m *migReporter) add(r api.MigrationReport) {
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.mu.Unlock()
	m.wake()
}

// addCheckpoint queues a checkpoint report; it never blocks.
func (m *migReporter) addCheckpoint(r api.CheckpointReport) {
	m.mu.Lock()
	m.checkpoints = append(m.checkpoints, r)
	m.mu.Unlock()
	m.wake()
}

func (m *migReporter) wake() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

func (m *migReporter) run(ctx context.Context) {
	if !m.d.reg.waitPast(ctx, 0) {
		return
	}
	b := newBackoff(20*time.Millisecond, 2*time.Second)
	for {
		m.mu.Lock()
		batch := append([]api.MigrationReport(nil), m.pending[:min(len(m.pending), api.MaxMigrationReports)]...)
		cks := append([]api.CheckpointReport(nil), m.checkpoints[:min(len(m.checkpoints), api.MaxMigrationReports)]...)
		m.mu.Unlock()
		if len(batch) == 0 && len(cks) == 0 {
			select {
			case <-m.notify:
				continue
			case <-ctx.Done():
				return
			}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := m.d.cfg.Client.Report(cctx, api.NodeStatus{Name: m.d.cfg.Name, BootID: m.d.bootID, Migrations: batch, Checkpoints: cks})
		cancel()
		m.d.noteCall("migration report", err)
		var ae *api.APIError
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusNotFound && ae.Status != http.StatusTooManyRequests {
			// Refused as it is: sending it again changes nothing.
			m.d.log.Error("the controllers refused migration reports", "reports", batch, "err", err)
		} else if err != nil {
			if !sleepCtx(ctx, b.next()) {
				return
			}
			continue
		}
		b.reset()
		m.mu.Lock()
		m.pending, m.checkpoints = m.pending[len(batch):], m.checkpoints[len(cks):]
		m.mu.Unlock()
	}
}
