package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"corral/api"
	"corral/display"
	"corral/reservation"
)

// runReservation manages advance reservations: corral reservation
// create|update|delete|list|show, with scontrol's KEY=VALUE settings
// (scontrol create|update|delete reservation, scontrol show reservation,
// sinfo -T).
func runReservation(ctx context.Context, env *cliEnv, args []string) error {
	return runActions(ctx, env, "reservation", []string{"create", "update", "delete", "list", "show"}, map[string]action{
		"create": {"[ReservationName=NAME] StartTime=TIME Duration=TIME|EndTime=TIME Users=LIST|Accounts=LIST Nodes=LIST|NodeCnt=N|TRES=cpu=N[,gres/gpu=M] [PartitionName=P] [Flags=LIST]", resvCreate},
		"update": {"ReservationName=NAME KEY=VALUE...   (lists and flags also KEY+=VALUE, KEY-=VALUE)", resvUpdate},
		"delete": {"NAME", resvDelete},
		"list":   {"(sinfo -T)", resvList},
		"show":   {"[NAME...]", resvShow},
	}, args)
}

// resvSettings splits KEY=VALUE words into settings. StartTime and
// EndTime go as RFC 3339 in the user's own time zone (a time of day or a
// date means the user's clock); what does not parse goes as typed, for
// the controllers to refuse in their words.
func resvSettings(cmd string, words []string, now time.Time) ([][2]string, error) {
	var out [][2]string
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE (keys: %s)", cmd, w, strings.Join(reservation.Keys, ", "))
		}
		if low := strings.ToLower(k); low == "starttime" || low == "endtime" {
			if t, err := reservation.ParseTime(v, now); err == nil {
				v = t.In(now.Location()).Format(time.RFC3339)
			}
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// resvPut sends a reservation request, printing Slurm's answer or error.
func resvPut(ctx context.Context, env *cliEnv, verb string, req api.ReservationRequest) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	name, err := cl.PutReservation(ctx, req)
	if err != nil {
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) {
			return err
		}
		// scontrol's words, on stderr, exit status 1.
		fmt.Fprintf(env.stderr, "Error %s the reservation: %s\n", verb, display.SafeText(apiErr.Message))
		return exitStatus(1)
	}
	switch verb {
	case "creating":
		fmt.Fprintf(env.stdout, "Reservation created: %s\n", display.Safe(name))
	case "updating":
		fmt.Fprintln(env.stdout, "Reservation updated.")
	}
	return nil
}

func resvCreate(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	settings, err := resvSettings(cmd, args, time.Now())
	if err != nil {
		return err
	}
	return resvPut(ctx, env, "creating", api.ReservationRequest{Create: true, Settings: settings})
}

func resvUpdate(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	settings, err := resvSettings(cmd, args, time.Now())
	if err != nil {
		return err
	}
	req := api.ReservationRequest{Settings: settings}
	if len(args) > 0 && !strings.Contains(args[0], "=") {
		req.Name, req.Settings = args[0], settings[1:]
	}
	return resvPut(ctx, env, "updating", req)
}

func resvDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: give one reservation name (ReservationName=NAME or NAME)", cmd)
	}
	name := args[0]
	if k, v, ok := strings.Cut(name, "="); ok && (strings.EqualFold(k, "ReservationName") || strings.EqualFold(k, "Reservation")) {
		name = v
	}
	return resvPut(ctx, env, "deleting", api.ReservationRequest{Name: name, Delete: true})
}

func resvList(ctx context.Context, env *cliEnv, _ string, _ []string) error {
	return listReservations(ctx, env, false)
}

// listReservations prints the reservations as sinfo -T does.
func listReservations(ctx context.Context, env *cliEnv, noHeader bool) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	rs, err := cl.Reservations(ctx)
	if err != nil {
		return err
	}
	return display.Reservations(env.stdout, rs, time.Local, noHeader)
}

func resvShow(ctx context.Context, env *cliEnv, _ string, names []string) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	rs, err := cl.Reservations(ctx)
	if err != nil {
		return err
	}
	if len(rs) == 0 && len(names) == 0 {
		fmt.Fprintln(env.stdout, "No reservations in the system")
		return nil
	}
	shown := 0
	for i := range rs {
		if len(names) > 0 && !containsFold(names, rs[i].Name) {
			continue
		}
		display.ShowReservation(env.stdout, &rs[i], time.Local)
		fmt.Fprintln(env.stdout)
		shown++
	}
	if len(names) > 0 && shown == 0 {
		return fmt.Errorf("Reservation %s not found", strings.Join(names, ", "))
	}
	return nil
}

// scontrolCreate is scontrol create: a reservation ("create reservation
// KEY=VALUE...", "create res ...", or the settings alone), or a partition
// (PartitionName=NAME KEY=VALUE...).
func scontrolCreate(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 {
		if k, v, ok := strings.Cut(args[0], "="); ok && strings.EqualFold(k, "PartitionName") {
			return partitionAdd(ctx, env, "create", append([]string{v}, args[1:]...))
		}
		if w := strings.ToLower(args[0]); w == "reservation" || w == "res" || w == "reservations" {
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("create: give a reservation's KEY=VALUE settings, e.g. scontrol create reservation StartTime=now Duration=60 Users=root Nodes=n1 Flags=MAINT")
	}
	return resvCreate(ctx, env, "create", args)
}

// scontrolDelete is scontrol delete ReservationName=NAME (or
// PartitionName=NAME).
func scontrolDelete(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 2 && (strings.EqualFold(args[0], "reservation") || strings.EqualFold(args[0], "res")) {
		args = []string{"ReservationName=" + args[1]}
	}
	if len(args) == 1 {
		if k, v, ok := strings.Cut(args[0], "="); ok && strings.EqualFold(k, "PartitionName") {
			return partitionDelete(ctx, env, "delete", []string{v})
		}
	}
	return resvDelete(ctx, env, "delete", args)
}
