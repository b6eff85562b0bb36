package noded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"corral/api"
	"corral/internal/ident"
)

// The values of Config.RunJobsAs.
const (
	// RunAsJobUser runs each job as its own user (the default).
	RunAsJobUser = "user"
	// RunAsDaemon runs every job as the daemon's user.
	RunAsDaemon = "daemon"
)

// userTTL is how long a looked-up user (uid, groups, home) is reused: a
// node starting hundreds of short jobs a second asks the passwd and group
// databases once a user per minute, not once a job, as slurmd caches its
// group lookups. A change to a user reaches jobs started after it expires.
const userTTL = time.Minute

// users caches the daemon's own identity (for good) and the jobs' users
// (for userTTL).
type users struct {
	mu     sync.Mutex
	self   *ident.User
	byName map[string]cachedUser
}

type cachedUser struct {
	u   ident.User
	err error
	at  time.Time
}

// selfUser returns the daemon's own user, looked up once.
func (c *users) selfUser() (ident.User, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.self != nil {
		return *c.self, nil
	}
	u, err := ident.Self()
	if err != nil {
		return ident.User{}, err
	}
	c.self = &u
	return u, nil
}

// lookup returns the user name, from the cache when it is fresh.
func (c *users) lookup(name string) (ident.User, error) {
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.byName[name]; ok && now.Sub(e.at) < userTTL {
		c.mu.Unlock()
		return e.u, e.err
	}
	c.mu.Unlock()
	u, err := ident.Lookup(name)
	if err != nil && !errors.Is(err, ident.ErrUnknownUser) {
		return u, err // a failing lookup is not remembered
	}
	c.mu.Lock()
	if c.byName == nil || len(c.byName) > 10_000 {
		c.byName = map[string]cachedUser{}
	}
	c.byName[name] = cachedUser{u: u, err: err, at: now}
	c.mu.Unlock()
	return u, err
}

// jobUser resolves whom job runs as on this node. A job of a user the node
// does not know is refused with a message that says what to do; so is one
// whose user differs from a daemon that is not root and so cannot switch.
func (d *Daemon) jobUser(j *api.Job) (ident.User, error) {
	self, err := d.users.selfUser()
	if err != nil {
		return ident.User{}, err
	}
	name := j.Spec.User
	if d.cfg.RunJobsAs == RunAsDaemon || name == "" || name == self.Name {
		return self, nil
	}
	u, err := d.users.lookup(name)
	if errors.Is(err, ident.ErrUnknownUser) {
		return ident.User{}, fmt.Errorf("job %d: user %q does not exist on node %s: create the user there (the node runs every job as its user, with the node's passwd and group), or submit as a user the node knows", j.ID, name, d.cfg.Name)
	}
	if err != nil {
		return ident.User{}, fmt.Errorf("job %d: %w", j.ID, err)
	}
	if os.Geteuid() != 0 && u.UID != self.UID {
		return ident.User{}, fmt.Errorf("job %d: node %s runs as %s, not root, and cannot run a job as %s: run the node daemon as root, or with --run-jobs-as daemon", j.ID, d.cfg.Name, self.Name, name)
	}
	return u, nil
}

// userEnv sets HOME, USER and LOGNAME to the job's user, as Slurm's job
// environment has them, whatever the submitter exported.
func userEnv(env []string, u ident.User) []string {
	set := map[string]string{"USER": u.Name, "LOGNAME": u.Name}
	if u.Home != "" {
		set["HOME"] = u.Home
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// jobShares lists the host directories a job works in: its working and
// submit directories, its user's home when it exists, and extra (the
// partition's shared paths). Nested paths are kept: the guest mounts the
// outer one first.
func jobShares(workDir, submitDir string, u ident.User, extra []string) []string {
	cand := append([]string{workDir, submitDir}, extra...)
	if u.Home != "" && u.Home != "/" {
		if st, err := os.Stat(u.Home); err == nil && st.IsDir() {
			cand = append(cand, u.Home)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range cand {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if p == "/" || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// partitionTTL is how long the daemon trusts the partitions it read.
const partitionTTL = 30 * time.Second

// partitionCache holds the partitions as the controllers last told them,
// for their shared paths.
type partitionCache struct {
	mu      sync.Mutex
	fetched time.Time
	parts   []api.Partition
}

// partition returns partition name ("" is the default partition) as the
// controllers last told it, reading the partitions at most every
// partitionTTL; the zero Partition when it is unknown. It runs outside the
// loop (it may wait on the network); when the controllers cannot be asked
// the last answer stands.
func (d *Daemon) partition(ctx context.Context, name string) api.Partition {
	c := &d.partitions
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.fetched) > partitionTTL {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		parts, err := d.cfg.Client.Partitions(ctx)
		cancel()
		if err != nil {
			d.log.Warn("cannot read the partitions' shared paths; using the last ones read", "err", err)
		} else {
			c.parts, c.fetched = parts, time.Now()
		}
	}
	for _, p := range c.parts {
		if p.Name == name || (name == "" && p.Default) {
			return p
		}
	}
	return api.Partition{}
}
