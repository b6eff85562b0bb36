package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"corral/internal/getopt"
)

func runInstallAliases(_ context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "install-aliases", getopt.Permute, args, flag('f', "force", "replace existing files"))
	if err != nil {
		return err
	}
	if len(o.args) != 1 {
		return fmt.Errorf("install-aliases: give one directory, e.g. corral install-aliases /usr/local/bin")
	}
	dir := o.args[0]
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install-aliases: cannot find this binary: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return err
	}
	target := aliasTarget(self)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(slurmAliases))
	for n := range slurmAliases {
		names = append(names, n)
	}
	sort.Strings(names)
	// Refuse before creating anything, so that a refusal does not leave
	// half of the aliases installed.
	if !o.has("force") {
		for _, name := range names {
			if link := filepath.Join(dir, name); exists(link) {
				return fmt.Errorf("install-aliases: %s exists; remove it or use --force", link)
			}
		}
	}
	for _, name := range names {
		link := filepath.Join(dir, name)
		if exists(link) {
			if err := os.Remove(link); err != nil {
				return fmt.Errorf("install-aliases: %w", err)
			}
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("install-aliases: %w", err)
		}
		fmt.Fprintf(env.stdout, "%s -> %s\n", link, target)
	}
	return nil
}

// exists reports whether path names anything, a dangling symlink included.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// clientBinaryName is the client binary's file name (make build puts it
// beside corral): every Slurm command is a user command, and the client
// binary starts in a fraction of the full one's time.
const clientBinaryName = "corral-client"

// aliasTarget is what the aliases point at: the client binary when it is
// installed beside self, else self.
func aliasTarget(self string) string {
	client := filepath.Join(filepath.Dir(self), clientBinaryName)
	if fi, err := os.Stat(client); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return client
	}
	return self
}
