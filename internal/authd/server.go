package authd

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/ident"
	"corral/internal/pki"
)

// Where the agent listens and how long its tokens live, unless told.
const (
	// DefaultSocket is the agent's socket when neither --socket nor
	// SocketEnv names one.
	DefaultSocket = "/run/corral/authd.sock"
	// SocketEnv names the environment variable that overrides
	// DefaultSocket, for the agent and the CLI alike.
	SocketEnv = "CORRAL_AUTHD"
	// DefaultTTL is how long a token lives unless Config.TTL says.
	DefaultTTL = time.Minute
)

// Limits of the agent's socket.
const (
	// answerTimeout bounds one exchange: a caller that does not read its
	// answer does not hold a handler.
	answerTimeout = 5 * time.Second
	// maxAnswering bounds the connections answered at once; further ones
	// wait in the listen backlog.
	maxAnswering = 64
)

// Config is an agent's.
type Config struct {
	// Socket is the Unix socket to listen on (DefaultSocket when empty).
	Socket string
	// Files are the host's certificate and key (a login host's or a
	// node's, corral ca issue) and the cluster's authority, which the
	// agent checks its own certificate against before it listens.
	Files pki.Files
	Log   *slog.Logger
	// TTL is each token's life (DefaultTTL when zero, at most
	// MaxLifetime).
	TTL time.Duration
}

// answer is what the agent writes back on each connection: a token, or
// why there is none. It is one JSON object and a newline.
type answer struct {
	Token string `json:"token,omitempty"`
	Error string `json:"error,omitempty"`
}

// minter mints tokens with the host's key.
type minter struct {
	key   crypto.Signer
	chain [][]byte
	host  pki.Identity
	ttl   time.Duration
	log   *slog.Logger
}

// Serve runs the agent until ctx ends: it listens on cfg.Socket (mode
// 0666, so that any local user may ask; its directory is created 0755)
// and answers each connection with one token for the user the kernel says
// is at the other end (SO_PEERCRED). Nothing the caller sends chooses the
// user. It returns nil when ctx ends, or why it could not start.
func Serve(ctx context.Context, cfg Config) error {
	m, err := newMinter(cfg)
	if err != nil {
		return err
	}
	path := cfg.Socket
	if path == "" {
		path = DefaultSocket
	}
	ln, err := listen(path)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	m.log.Info("identity agent listening", "socket", path, "host", m.host.Name, "role", m.host.Role, "ttl", m.ttl)

	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxAnswering)
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			m.log.Warn("identity agent: accept failed; retrying", "socket", path, "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			conn.Close()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			m.answer(conn)
		}()
	}
}

// newMinter loads the host's certificate and key and checks that they
// make tokens the cluster's authority accepts: a wrong file, role or
// authority is told at start, not at each caller's request.
func newMinter(cfg Config) (*minter, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 2*time.Second || ttl > MaxLifetime {
		return nil, fmt.Errorf("identity agent: token lifetime %s: give 2s to %s (default %s)", ttl, MaxLifetime, DefaultTTL)
	}
	f := cfg.Files
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("identity agent: --tls-cert, --tls-key and --tls-ca are required: the host's certificate and key (corral ca issue --role login --name HOST) and the cluster's authority (ca.crt)")
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("identity agent: --tls-cert %s / --tls-key %s: %w", f.Cert, f.Key, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("identity agent: --tls-key %s: the key cannot sign", f.Key)
	}
	roots, err := f.Pool()
	if err != nil {
		return nil, fmt.Errorf("identity agent: %w", err)
	}
	m := &minter{key: key, chain: pair.Certificate, ttl: ttl, log: log}
	if id, ok := pki.IdentityOf(pair.Leaf); ok {
		m.host = id
	}
	now := time.Now()
	token, err := Mint(key, pair.Certificate, Claims{User: "authd-self-check", Host: m.host.Name, IssuedAt: now, Expires: now.Add(ttl)})
	if err == nil {
		_, _, err = Verify(token, roots, now)
	}
	if err != nil {
		return nil, fmt.Errorf("identity agent: the controllers would refuse this host's tokens: %w", err)
	}
	return m, nil
}

// listen makes the socket's directory and listens on path, replacing a
// socket no agent answers on any more.
func listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("identity agent: the socket's directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("identity agent: %s exists and is not a socket: remove it, or give another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("identity agent: another agent already answers on %s: stop it first, or give another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("identity agent: removing the stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("identity agent: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("identity agent: making %s reachable by every local user: %w", path, err)
	}
	return ln, nil
}

// answer writes one token, for the user at the other end of conn, and
// closes it.
func (m *minter) answer(conn *net.UnixConn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(answerTimeout))
	var a answer
	token, cred, err := m.mintFor(conn)
	who := []any{"uid", cred.Uid, "pid", cred.Pid}
	if cred.Pid == 0 {
		who = []any{"uid", "unknown"} // the kernel did not say
	}
	if err != nil {
		m.log.Warn("identity token refused", append(who, "err", err)...)
		a.Error = err.Error()
	} else {
		a.Token = token
	}
	if err := json.NewEncoder(conn).Encode(a); err != nil && a.Error == "" {
		m.log.Warn("identity token not delivered", append(who, "err", err)...)
	}
}

// mintFor mints a token for the peer of conn as the kernel and the host's
// user databases know it.
func (m *minter) mintFor(conn *net.UnixConn) (string, unix.Ucred, error) {
	cred, err := peerCred(conn)
	if err != nil {
		return "", cred, err
	}
	u, err := ident.LookupID(cred.Uid)
	if err != nil {
		return "", cred, fmt.Errorf("host %s cannot vouch for you: %w (the agent vouches only for users in the host's passwd database)", m.host.Name, err)
	}
	now := time.Now()
	// UID and GID are the caller's effective ids, as the kernel reports
	// them (so `sg proj sbatch` submits as proj, as with Slurm); the
	// groups are those the host's group database gives the user.
	c := Claims{User: u.Name, UID: cred.Uid, GID: cred.Gid, Groups: u.Groups, Host: m.host.Name, IssuedAt: now, Expires: now.Add(m.ttl)}
	token, err := Mint(m.key, m.chain, c)
	if err != nil {
		return "", cred, fmt.Errorf("host %s: %w", m.host.Name, err)
	}
	m.log.Debug("identity token minted", "uid", cred.Uid, "user", u.Name, "gid", cred.Gid)
	return token, cred, nil
}

// peerCred asks the kernel who is at the other end of conn.
func peerCred(conn *net.UnixConn) (unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return unix.Ucred{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return unix.Ucred{}, err
	}
	if cerr != nil {
		return unix.Ucred{}, fmt.Errorf("the kernel did not say who is calling (SO_PEERCRED): %w", cerr)
	}
	return *cred, nil
}
