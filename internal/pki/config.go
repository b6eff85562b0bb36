package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names a holder's certificate and key and the authority's
// certificate (the --tls-cert, --tls-key and --tls-ca flags). A client may
// give only CA.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is named: TLS is on.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// checkServer says which file is missing for a server, which needs all
// three.
func (f Files) checkServer() error {
	switch {
	case f.CA == "":
		return errors.New("--tls-ca is required with TLS: the authority's certificate (ca.crt of corral ca init)")
	case f.Cert == "" || f.Key == "":
		return errors.New("--tls-cert and --tls-key are required with TLS: this daemon's certificate and key (corral ca issue)")
	}
	return nil
}

// Pool reads the authority's certificate into a pool.
func (f Files) Pool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.CA)
	}
	return pool, nil
}

func (f Files) pair() (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", f.Cert, f.Key, err)
	}
	return pair, nil
}

// Server returns the configuration of a daemon's TLS listener: its own
// certificate, and client certificates verified against the authority when
// a client shows one (auth: tls.VerifyClientCertIfGiven for the API, which
// also serves clients without one; tls.RequireAndVerifyClientCert for
// Raft).
func (f Files) Server(auth tls.ClientAuthType) (*tls.Config, error) {
	if err := f.checkServer(); err != nil {
		return nil, err
	}
	pair, err := f.pair()
	if err != nil {
		return nil, err
	}
	pool, err := f.Pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: auth, MinVersion: tls.VersionTLS13}, nil
}

// Client returns the configuration of a TLS client: servers verified
// against the authority, and the holder's certificate shown to them when
// one is named.
func (f Files) Client() (*tls.Config, error) {
	if f.CA == "" {
		return nil, errors.New("the authority's certificate is required to verify the controllers (--tls-ca, or CORRAL_CA for the CLI)")
	}
	pool, err := f.Pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if f.Cert != "" || f.Key != "" {
		pair, err := f.pair()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// RequireRole returns a VerifyConnection check that refuses a peer whose
// verified certificate is not of the given role: Raft accepts members
// only, on both ends.
func RequireRole(role Role) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		chains := cs.VerifiedChains
		if len(chains) == 0 || len(chains[0]) == 0 {
			return fmt.Errorf("the peer showed no certificate of the cluster's authority; a %s's is required", role)
		}
		id, ok := IdentityOf(chains[0][0])
		if !ok || id.Role != role {
			return fmt.Errorf("the peer's certificate (%s) is not a %s's", chains[0][0].Subject.CommonName, role)
		}
		return nil
	}
}
