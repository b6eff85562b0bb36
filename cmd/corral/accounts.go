package main

import (
	"context"
	"fmt"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
)

// This file holds the fair-share tree's commands: account and user.

func runAccount(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "account", []string{"add", "modify", "delete", "list"}, map[string]action{
		"add":    {"NAME [--parent ACCOUNT] [--shares N]", accountAdd},
		"modify": {"NAME [--parent ACCOUNT] [--shares N]", accountModify},
		"delete": {"NAME", accountDelete},
		"list":   {"", accountList},
	}, args)
}

func accountOptions() []getopt.Option {
	return []getopt.Option{
		valued(0, "parent", "ACCOUNT", "the account this one is under (default root)"),
		valued(0, "shares", "N", "the account's fair-share shares among its siblings (default 1)"),
	}
}

func findAccount(p *api.PolicyView, name string) *api.Account {
	for i := range p.Accounts {
		if p.Accounts[i].Name == name {
			return &p.Accounts[i]
		}
	}
	return nil
}

func accountAdd(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return accountPut(ctx, env, cmd, args, false)
}

func accountModify(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return accountPut(ctx, env, cmd, args, true)
}

// accountPut adds an account (under root with 1 share unless told), or
// modifies one starting from its current parent and shares.
func accountPut(ctx context.Context, env *cliEnv, cmd string, args []string, modify bool) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args, accountOptions()...)
	if err != nil {
		return err
	}
	name, err := oneName(o, cmd, "account", "account add physics --shares 40")
	if err != nil {
		return err
	}
	shares := 1.0
	if o.has("shares") {
		if shares, err = sharesOption(o); err != nil {
			return fmt.Errorf("%s %s: %w", cmd, name, err)
		}
	}
	if modify && !o.has("parent") && !o.has("shares") {
		return fmt.Errorf("%s %s: nothing to change: give --parent ACCOUNT or --shares N", cmd, name)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	p, err := cl.Policy(ctx)
	if err != nil {
		return err
	}
	a := api.Account{Name: name, Parent: "root", Shares: shares}
	old := findAccount(p, name)
	switch {
	case modify && old == nil:
		return fmt.Errorf("%s: no account named %s; add it with: %s account add %s", cmd, name, env.prog, name)
	case !modify && old != nil:
		return fmt.Errorf("%s: account %s exists; change it with: %s account modify %s [--parent ACCOUNT] [--shares N]", cmd, name, env.prog, name)
	case modify:
		a = *old
		if o.has("shares") {
			a.Shares = shares
		}
	}
	if o.has("parent") {
		a.Parent = o.get("parent")
	}
	return cl.PutAccount(ctx, api.AccountRequest{Account: a})
}

func accountDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return deleteNamed(ctx, env, cmd, args, "account", "account delete physics", func(cl *api.Client, name string) error {
		return cl.PutAccount(ctx, api.AccountRequest{Account: api.Account{Name: name}, Delete: true})
	})
}

func accountList(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, p, err := listPolicy(ctx, env, cmd, args, flag(0, "json", "print the accounts and users as JSON"))
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, map[string]any{"accounts": p.Accounts, "users": p.Users})
	}
	return display.Accounts(env.stdout, p.Accounts, p.Users)
}

func runUser(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "user", []string{"add", "modify", "delete"}, map[string]action{
		"add":    {"NAME --account ACCOUNT [--shares N]", userAdd},
		"modify": {"NAME --account ACCOUNT --shares N", userModify},
		"delete": {"NAME --account ACCOUNT", userDelete},
	}, args)
}

// userArgs parses a user action's command line: the user's name and the
// account, which every action needs.
func userArgs(env *cliEnv, cmd string, args []string, opts ...getopt.Option) (*optSet, string, error) {
	opts = append([]getopt.Option{valued('A', "account", "ACCOUNT", "the account the user is in (required)")}, opts...)
	o, err := parseOpts(env, cmd, getopt.Permute, args, opts...)
	if err != nil {
		return nil, "", err
	}
	name, err := oneName(o, cmd, "user", "user add alice --account physics")
	if err != nil {
		return nil, "", err
	}
	if o.get("account") == "" {
		return nil, "", fmt.Errorf("%s %s: --account is required (e.g. %s %s %s --account physics)", cmd, name, env.prog, cmd, name)
	}
	return o, name, nil
}

func findUser(p *api.PolicyView, name, account string) *api.AccountUser {
	for i := range p.Users {
		if p.Users[i].Name == name && p.Users[i].Account == account {
			return &p.Users[i]
		}
	}
	return nil
}

func userAdd(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return userPut(ctx, env, cmd, args, false)
}

func userModify(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return userPut(ctx, env, cmd, args, true)
}

// userPut places a user in an account, or changes the user's shares there.
func userPut(ctx context.Context, env *cliEnv, cmd string, args []string, modify bool) error {
	o, name, err := userArgs(env, cmd, args, valued(0, "shares", "N", "the user's fair-share shares in the account (default 1)"))
	if err != nil {
		return err
	}
	account := o.get("account")
	shares := 1.0
	if o.has("shares") {
		if shares, err = sharesOption(o); err != nil {
			return fmt.Errorf("%s %s: %w", cmd, name, err)
		}
	} else if modify {
		return fmt.Errorf("%s %s: nothing to change: give --shares N", cmd, name)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	p, err := cl.Policy(ctx)
	if err != nil {
		return err
	}
	old := findUser(p, name, account)
	switch {
	case modify && old == nil:
		return fmt.Errorf("%s: user %s is not in account %s; add it with: %s user add %s --account %s", cmd, name, account, env.prog, name, account)
	case !modify && old != nil:
		return fmt.Errorf("%s: user %s is already in account %s; change its shares with: %s user modify %s --account %s --shares N", cmd, name, account, env.prog, name, account)
	}
	return cl.PutUser(ctx, api.UserRequest{User: api.AccountUser{Name: name, Account: account, Shares: shares}})
}

func userDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, name, err := userArgs(env, cmd, args)
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return cl.PutUser(ctx, api.UserRequest{User: api.AccountUser{Name: name, Account: o.get("account")}, Delete: true})
}
