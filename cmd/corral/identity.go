package main

import (
	"fmt"
	"os/user"
)

// callerIdentity decides who the caller is. It is the one place to change
// when authenticated tenants arrive: for now the user comes from $USER (or
// the process's uid), the account from -A.
func callerIdentity(env *cliEnv) (string, error) {
	if u := env.getenv("USER"); u != "" {
		return u, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("cannot tell who you are: set $USER (%w)", err)
	}
	return u.Username, nil
}
