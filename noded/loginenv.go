package noded

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"corral/internal/ident"
)

// loginEnvTimeout bounds the user's login shell for sbatch --get-user-env
// (Slurm's default timeout is 8 s).
const loginEnvTimeout = 8 * time.Second

// loginEnvLimit bounds what is read of the login shell's environment.
const loginEnvLimit = 1 << 20

// loginEnvSkip are variables of the login shell's own that say nothing
// about the user's environment.
var loginEnvSkip = []string{"_", "PWD", "OLDPWD", "SHLVL"}

// withLoginEnv returns env with the user's login environment under it
// (sbatch --get-user-env): the variables the user's login shell sets, run
// as them on this node (`SHELL -l -c 'env -0'`, as Slurm runs `su -
// USER -c env`), that env does not set itself, since the submitted ones
// win. A login shell that fails or takes longer than loginEnvTimeout adds
// nothing; the job starts with env, and the node logs why.
func withLoginEnv(env []string, u ident.User, log *slog.Logger) []string {
	login, err := loginEnv(u)
	if err != nil {
		log.Warn("reading the user's login environment (--get-user-env) failed; the job starts without it", "user", u.Name, "err", err)
		return env
	}
	have := make(map[string]bool, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	out := slices.Clone(env)
	for _, kv := range login {
		k, _, ok := strings.Cut(kv, "=")
		if ok && k != "" && !have[k] && !slices.Contains(loginEnvSkip, k) {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// loginEnv runs user u's login shell as u and returns the environment it
// sets up.
func loginEnv(u ident.User) ([]string, error) {
	shell := u.Shell
	if shell == "" || !filepath.IsAbs(shell) || strings.HasSuffix(shell, "/nologin") || strings.HasSuffix(shell, "/false") {
		shell = "/bin/sh"
	}
	ctx, cancel := context.WithTimeout(context.Background(), loginEnvTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-l", "-c", "env -0")
	cmd.Env = []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name, "SHELL=" + shell,
		"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Dir = "/"
	if st, err := os.Stat(u.Home); err == nil && st.IsDir() {
		cmd.Dir = u.Home
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	if switchUser(u) {
		attr.Credential = u.Credential()
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout = &limitWriter{w: &out, n: loginEnvLimit}
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\x00"), "\x00"), nil
}

// limitWriter writes at most n bytes to w and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(l.n, len(p))
		l.n -= k
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
