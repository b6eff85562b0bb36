package ctld

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Peer is one member of the --peers list.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers parses "c1=127.0.0.1:7101,c2=127.0.0.1:7102".
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not ID=HOST:PORT (example: c1=127.0.0.1:7101,c2=127.0.0.1:7102)", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: %s: %q is not HOST:PORT: %w", id, addr, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--peers: member %s is listed twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	sort.Slice(peers, func(a, b int) bool { return peers[a].ID < peers[b].ID })
	return peers, nil
}

// RaftTuning holds the timing knobs; zero fields take defaults suited to a
// LAN and to the failover goal (answer again within 5 s of a leader crash).
type RaftTuning struct {
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	SnapshotInterval time.Duration
	SnapshotEntries  uint64
	// TrailingLogs is the log a member keeps behind its snapshot (zero:
	// Raft's default, 10240 entries).
	TrailingLogs uint64
}

type raftNode struct {
	raft      *raft.Raft
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore
	// logs is the bounded cache of recent entries in front of store.
	logs *logCache
}

// startRaft starts this member's Raft; one without Raft state bootstraps
// the cluster of peers, unless it joins a running cluster (join).
func startRaft(id, bind, dataDir string, peers []Peer, join bool, fsm raft.FSM, tune RaftTuning, t *clusterTLS, log *slog.Logger) (*raftNode, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir %s: %w", dataDir, err)
	}
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(id)
	cfg.BatchApplyCh = true
	cfg.MaxAppendEntries = 512
	// New entries are sent to the followers at once; CommitTimeout is how
	// long the leader waits, when none come, before it sends an empty
	// AppendEntries that tells the followers what was committed since. It
	// is a trade of idle CPU against latency, not throughput: a follower
	// applies an entry (and its readers see it: squeue, a job's state, a
	// blocking query) CommitTimeout to twice that after the leader did,
	// while a stream of entries carries the commit index anyway. At 20 ms
	// submit -> COMPLETED read through a follower took 20-40 ms longer,
	// and a fast sequential one-job submission stream cost the voters the
	// same CPU per job (docs/performance.md). The price of 5 ms is idle
	// CPU: 160 ms a second for three quiet voters against 74 at 20 ms,
	// which a slow stream of submissions (a loaded machine's sbatch loop)
	// pays per job.
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.HeartbeatTimeout = orDefault(tune.HeartbeatTimeout, 500*time.Millisecond)
	cfg.ElectionTimeout = orDefault(tune.ElectionTimeout, 500*time.Millisecond)
	cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	cfg.SnapshotInterval = orDefault(tune.SnapshotInterval, 30*time.Second)
	if tune.SnapshotEntries > 0 {
		cfg.SnapshotThreshold = tune.SnapshotEntries
	} else {
		cfg.SnapshotThreshold = 16384
	}
	if tune.TrailingLogs > 0 {
		cfg.TrailingLogs = tune.TrailingLogs
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: hclog.Warn, Output: slogWriter{log}, DisableTime: true,
	})

	// The freelist is rebuilt on open instead of written on every commit:
	// each Raft append is one fsync'd bbolt transaction, and skipping the
	// freelist pages makes those transactions smaller. Durability of the
	// log itself is unchanged.
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return nil, fmt.Errorf("opening raft log %s: %w", filepath.Join(dataDir, "raft.db"), err)
	}
	logs, err := newLogCache(store, logCacheEntries, logCacheBytes)
	if err != nil {
		store.Close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStore(dataDir, 2, slogWriter{log})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("opening snapshot store in %s: %w", dataDir, err)
	}
	advertise, err := net.ResolveTCPAddr("tcp", bind)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("--raft %s: %w", bind, err)
	}
	var trans *raft.NetworkTransport
	if t != nil {
		var stream *raftStream
		if stream, err = newRaftStream(bind, advertise, t); err == nil {
			trans = raft.NewNetworkTransport(stream, 8, 10*time.Second, slogWriter{log})
		}
	} else {
		trans, err = raft.NewTCPTransport(bind, advertise, 8, 10*time.Second, slogWriter{log})
	}
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("listening for raft on %s: %w", bind, err)
	}
	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	if !has && !join {
		if err := bootstrap(cfg, logs, store, snaps, trans, id, bind, peers); err != nil {
			trans.Close()
			store.Close()
			return nil, err
		}
	}
	r, err := raft.NewRaft(cfg, fsm, logs, store, snaps, trans)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, fmt.Errorf("starting raft: %w", err)
	}
	return &raftNode{raft: r, transport: trans, store: store, logs: logs}, nil
}

func bootstrap(cfg *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport, id, bind string, peers []Peer) error {
	if len(peers) == 0 {
		peers = []Peer{{ID: id, Addr: bind}}
	}
	var conf raft.Configuration
	self := false
	for _, p := range peers {
		if p.ID == id {
			self = true
		}
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
		})
	}
	if !self {
		return fmt.Errorf("--peers does not list this member (--id %s); list every member, this one included", id)
	}
	if err := raft.BootstrapCluster(cfg, logs, stable, snaps, trans, conf); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrapping raft: %w", err)
	}
	return nil
}

func (n *raftNode) shutdown() error {
	err := n.raft.Shutdown().Error()
	n.transport.Close()
	if cerr := n.store.Close(); err == nil {
		err = cerr
	}
	return err
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// slogWriter adapts raft's io.Writer logging to slog.
type slogWriter struct{ log *slog.Logger }

var _ io.Writer = slogWriter{}

func (w slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if msg != "" {
		w.log.Info(msg, "component", "raft")
	}
	return len(p), nil
}
