package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"strings"

	"corral/api"
	"corral/internal/authd"
)

// callerIdentity is who the caller says it is: on a host whose agent
// vouches for it, the user of this process's uid (the agent tells the
// controllers so, whatever $USER says); otherwise $USER (or the process's
// uid). A cluster that authenticates requests believes only the
// credentials; a token's user is what the controllers say (tokenUser).
func callerIdentity(env *cliEnv) (string, error) {
	creds, _ := callerCredentials(env)
	return claimedUser(env, creds)
}

// claimedUser is callerIdentity for a caller whose credentials are creds.
func claimedUser(env *cliEnv, creds api.Credentials) (string, error) {
	if _, ok := creds.(*authd.Agent); ok {
		return currentUser()
	}
	if u := env.getenv("USER"); u != "" {
		return u, nil
	}
	return currentUser()
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("cannot tell who you are: set $USER (%w)", err)
	}
	return u.Username, nil
}

// tokenUser returns the user the controllers take cl's token for; "" when
// cl sends no token.
func tokenUser(ctx context.Context, cl *api.Client) (string, error) {
	if _, ok := cl.Auth.(api.BearerToken); !ok {
		return "", nil
	}
	v, err := cl.AuthView(ctx)
	if err != nil {
		return "", fmt.Errorf("asking the controllers whom the token stands for: %w", err)
	}
	return v.Whoami.Name, nil
}

// callerCredentials decides what the CLI proves about its caller in each
// request's Authorization header, in this order: a personal or service
// token (CORRAL_TOKEN, or the file CORRAL_TOKEN_FILE names, which only its
// owner may read); else the host's identity agent when its socket exists
// ($CORRAL_AUTHD, default /run/corral/authd.sock); else nothing (nil), for
// a cluster that authenticates no one.
func callerCredentials(env *cliEnv) (api.Credentials, error) {
	if t := strings.TrimSpace(env.getenv("CORRAL_TOKEN")); t != "" {
		return api.BearerToken(t), nil
	}
	if path := env.getenv("CORRAL_TOKEN_FILE"); path != "" {
		return readTokenFile(path)
	}
	named := env.getenv(authd.SocketEnv)
	sock := agentSocket(env, "")
	fi, err := os.Stat(sock)
	switch {
	case err == nil && fi.Mode()&fs.ModeSocket != 0:
		return &authd.Agent{Socket: sock}, nil
	case named != "" && err != nil:
		return nil, fmt.Errorf("%s=%s: no identity agent there (%w): is corral authd running? Unset %s to use %s", authd.SocketEnv, named, err, authd.SocketEnv, authd.DefaultSocket)
	case named != "":
		return nil, fmt.Errorf("%s=%s is not a socket: give the agent's (corral authd --socket)", authd.SocketEnv, named)
	}
	return nil, nil
}

// agentSocket is the identity agent's socket: flag (--socket) when given,
// else $CORRAL_AUTHD, else the default.
func agentSocket(env *cliEnv, flag string) string {
	return orString(flag, orString(env.getenv(authd.SocketEnv), authd.DefaultSocket))
}

// readTokenFile reads the token in path, refusing a file others may read:
// whoever reads the token acts as its user.
func readTokenFile(path string) (api.Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE=%s: mode %04o lets others read your token: run chmod 600 %s (and make a new token if others may have read it)", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE=%s: %w", path, err)
	}
	token := strings.TrimSpace(string(data))
	switch {
	case token == "":
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE=%s is empty: put the token corral token create printed in it", path)
	case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return nil, fmt.Errorf("CORRAL_TOKEN_FILE=%s holds more than a token (spaces, lines or control characters): put only the token in it", path)
	}
	return api.BearerToken(token), nil
}
