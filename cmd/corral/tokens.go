package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"corral/api"
	"corral/internal/getopt"
)

// This file holds the identity commands: token, role and whoami.

func runToken(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "token", []string{"create", "list", "renew", "revoke"}, map[string]action{
		"create": {"[--user U] [--role R] [--account A] [--ops submit,read,...] [--expires 30d] [--description TEXT]", tokenCreate},
		"list":   {"[--json]", tokenList},
		"renew":  {"ID [--expires 30d]", tokenRenew},
		"revoke": {"ID", tokenRevoke},
	}, args)
}

// parseLifetime reads --expires: days ("30d"), or a Go duration ("12h").
func parseLifetime(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 {
			return 0, &optionError{"expires", v, "give days (30d) or a duration (12h)", err}
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < time.Minute {
			return 0, &optionError{"expires", v, "give days (30d) or a duration of at least a minute (12h)", err}
		}
	}
	return int64(d / time.Second), nil
}

func tokenCreate(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args,
		valued(0, "user", "USER", "whom the token stands for (default: you; others: admins only)"),
		valued(0, "role", "ROLE", "admin, operator, coordinator or user (default user; no more than your own)"),
		valued(0, "account", "ACCOUNT", "the account a coordinator's token coordinates"),
		valued(0, "ops", "LIST", "limit the token to these operations: submit, read, cancel, exec, admin (default: all its role allows)"),
		valued(0, "expires", "LIFETIME", "how long it lasts: 30d (the default), 12h; at most 366d"),
		valued(0, "description", "TEXT", "what the token is for, shown by token list"),
		flag(0, "join", "a join token: it lets a new node get its credential (noded --join); admins only; 1h unless --expires"),
		flag(0, "reusable", "a join token many nodes may use until it expires (default: one node)"),
	)
	if err != nil {
		return err
	}
	if err := noArgs(o, cmd); err != nil {
		return err
	}
	life, err := parseLifetime(o.get("expires"))
	if err != nil {
		return err
	}
	req := api.TokenRequest{User: o.get("user"), Role: api.Role(o.get("role")), Account: o.get("account"),
		Description: o.get("description"), ExpiresIn: life, Join: o.has("join"), Reusable: o.has("reusable")}
	for _, op := range o.list("ops") {
		req.Ops = append(req.Ops, api.Op(op))
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	resp, err := cl.Token(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, resp.Secret)
	if resp.Token.Join {
		fmt.Fprintf(env.stderr, "join token %s expires %s; start a new node with: corral noded --join TOKEN --tls-ca ca.crt --ctld ... (the secret is shown only now)\n",
			resp.Token.ID, resp.Token.Expires.Local().Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(env.stderr, "token %s for %s (role %s) expires %s; this is the only time its secret is shown: keep it in a file only you can read (chmod 600) and point CORRAL_TOKEN_FILE at it, or set CORRAL_TOKEN\n",
		resp.Token.ID, resp.Token.User, resp.Token.Role, resp.Token.Expires.Local().Format(time.RFC3339))
	return nil
}

// fetchAuthView parses a command that takes only --json (jsonHelp says
// what it prints) and fetches what the controllers say of the caller: who
// it is, its tokens and the role grants it may see.
func fetchAuthView(ctx context.Context, env *cliEnv, cmd string, args []string, jsonHelp string) (asJSON bool, v *api.AuthView, err error) {
	o, err := parseOpts(env, cmd, getopt.Permute, args, flag(0, "json", jsonHelp))
	if err != nil {
		return false, nil, err
	}
	if err := noArgs(o, cmd); err != nil {
		return false, nil, err
	}
	cl, err := env.client()
	if err != nil {
		return false, nil, err
	}
	v, err = cl.AuthView(ctx)
	return o.has("json"), v, err
}

// opsText lists a token's operations, or says none when it has none.
func opsText(ops []api.Op, none string) string {
	if len(ops) == 0 {
		return none
	}
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = string(op)
	}
	return strings.Join(parts, ",")
}

func tokenList(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	asJSON, v, err := fetchAuthView(ctx, env, cmd, args, "print the tokens as JSON")
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env, v.Tokens)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tROLE\tACCOUNT\tOPS\tEXPIRES\tSTATE\tDESCRIPTION")
	now := time.Now()
	for _, t := range v.Tokens {
		st := "active"
		switch {
		case !t.Revoked.IsZero():
			st = "revoked"
		case !now.Before(t.Expires):
			st = "expired"
		}
		role := string(t.Role)
		if t.Join {
			role = fmt.Sprintf("join (%d used)", t.Uses)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, role, orString(t.Account, "-"), opsText(t.Ops, "all"),
			t.Expires.Local().Format("2006-01-02T15:04"), st, t.Description)
	}
	return tw.Flush()
}

func tokenRenew(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args, valued(0, "expires", "LIFETIME", "the new lifetime from now: 30d (the default), 12h"))
	if err != nil {
		return err
	}
	id, err := oneName(o, cmd, "token", "token renew 3f9a1c2b7d4e")
	if err != nil {
		return err
	}
	life, err := parseLifetime(o.get("expires"))
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	resp, err := cl.Token(ctx, api.TokenRequest{Renew: id, ExpiresIn: life})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "token %s now expires %s\n", id, resp.Token.Expires.Local().Format(time.RFC3339))
	return nil
}

func tokenRevoke(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args)
	if err != nil {
		return err
	}
	id, err := oneName(o, cmd, "token", "token revoke 3f9a1c2b7d4e")
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if _, err := cl.Token(ctx, api.TokenRequest{Revoke: id}); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "token %s revoked\n", id)
	return nil
}

func runRole(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "role", []string{"set", "delete", "list"}, map[string]action{
		"set":    {"USER --role admin|operator|coordinator [--account A,...]", roleSet},
		"delete": {"USER", roleDelete},
		"list":   {"[--json]", roleList},
	}, args)
}

func roleSet(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args,
		valued(0, "role", "ROLE", "admin, operator or coordinator"),
		valued(0, "account", "LIST", "the accounts a coordinator coordinates (with their children)"))
	if err != nil {
		return err
	}
	user, err := oneName(o, cmd, "user", "role set carol --role coordinator --account physics")
	if err != nil {
		return err
	}
	if o.get("role") == "" {
		return fmt.Errorf("%s %s: give --role admin, operator or coordinator", cmd, user)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return cl.SetRole(ctx, api.RoleRequest{Grant: api.RoleGrant{User: user, Role: api.Role(o.get("role")), Accounts: o.list("account")}})
}

func roleDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args)
	if err != nil {
		return err
	}
	user, err := oneName(o, cmd, "user", "role delete carol")
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return cl.SetRole(ctx, api.RoleRequest{Grant: api.RoleGrant{User: user}, Delete: true})
}

func roleList(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	asJSON, v, err := fetchAuthView(ctx, env, cmd, args, "print the grants as JSON")
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env, v.Roles)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tROLE\tACCOUNTS")
	for _, g := range v.Roles {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.User, g.Role, orString(strings.Join(g.Accounts, ","), "-"))
	}
	return tw.Flush()
}

func runWhoami(ctx context.Context, env *cliEnv, args []string) error {
	asJSON, v, err := fetchAuthView(ctx, env, "whoami", args, "print the principal as JSON")
	if err != nil {
		return err
	}
	w := v.Whoami
	if asJSON {
		return writeJSON(env, w)
	}
	line := fmt.Sprintf("%s %s", w.Kind, orString(w.Name, "-"))
	if w.Role != "" {
		line += ", role " + string(w.Role)
	}
	if len(w.Accounts) > 0 {
		line += " of " + strings.Join(w.Accounts, ",")
	}
	if len(w.Ops) > 0 {
		line += ", limited to " + opsText(w.Ops, "")
	}
	fmt.Fprintf(env.stdout, "%s (%s)\n", line, w.Via)
	return nil
}
