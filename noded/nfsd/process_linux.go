package nfsd

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"corral/internal/ident"
	"corral/internal/procref"
)

// ProcessConfig is the configuration file of a file server process (`corral
// nfsd CONFIG`), which the vm runner writes in the VM's state directory.
type ProcessConfig struct {
	User   ident.User `json:"user"`
	Root   string     `json:"root"`
	Shares []string   `json:"shares"`
	// VMPID and VMStart name the QEMU process served (its pid and start
	// time in clock ticks since boot): the server exits when it does,
	// whether or not a node daemon is there to say so.
	VMPID   int    `json:"vm_pid"`
	VMStart uint64 `json:"vm_start_ticks"`
	// HandleKey is the job's handle key (Config.HandleKey): the vm runner
	// makes it once per job and gives every server of the job the same.
	HandleKey []byte `json:"handle_key"`
	// RootHandleKey is the root export's own key (Config.RootHandleKey),
	// a warm start's snapshot's; empty when the root has the job's.
	RootHandleKey []byte `json:"root_handle_key,omitempty"`
}

// ListenFD is the descriptor a file server process inherits its listener
// on: the socket the vm runner opened in the VM's network namespace.
const ListenFD = 3

// ServeIfChild turns the running program into a file server process
// when it was started as `PROGRAM arg CONFIG`, and exits when that is
// done; otherwise it returns at once. Test binaries that start the vm
// runner call it first in TestMain, passing the arg they give the runner
// (Config.NFSServer), as `corral nfsd CONFIG` does in production.
func ServeIfChild(arg string) {
	if len(os.Args) != 3 || os.Args[1] != arg {
		return
	}
	if err := RunProcess(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunProcess is a file server process: it reads its configuration, serves
// on the listener it inherited until its VM's QEMU exits or it gets
// SIGTERM, and returns. Its log goes to stderr.
func RunProcess(configPath string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := os.ReadFile(configPath)
	if err != nil {
		return fmt.Errorf("nfsd: %w", err)
	}
	var cfg ProcessConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("nfsd: %s: %w", configPath, err)
	}
	f := os.NewFile(ListenFD, "listener")
	if f == nil {
		return errors.New("nfsd: no listener on descriptor 3 (the node daemon starts this program)")
	}
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("nfsd: descriptor 3 is not a listening socket: %w", err)
	}
	if len(cfg.HandleKey) == 0 {
		log.Warn("no handle key in the configuration: the guest's file handles will not survive a restart of this server", "config", configPath)
	}
	s, err := New(Config{User: cfg.User, Root: cfg.Root, Shares: cfg.Shares, HandleKey: cfg.HandleKey, RootHandleKey: cfg.RootHandleKey, Logger: log})
	if err != nil {
		return fmt.Errorf("nfsd: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	vmGone := make(chan struct{})
	if cfg.VMPID > 0 {
		if err := watchProcess(cfg.VMPID, cfg.VMStart, vmGone); err != nil {
			s.Close()
			return fmt.Errorf("nfsd: watching the VM (pid %d): %w", cfg.VMPID, err)
		}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	log.Info("serving", "exports", s.Exports(), "user", cfg.User.Name, "uid", cfg.User.UID, "vm_pid", cfg.VMPID)
	select {
	case err = <-done:
	case <-vmGone:
		log.Info("the VM ended")
	case sig := <-term:
		log.Info("stopping", "signal", sig)
	}
	s.Close()
	return err
}

// watchProcess closes gone when the process pid, started at start, has
// exited (at once when it already has).
func watchProcess(pid int, start uint64, gone chan<- struct{}) error {
	p, err := procref.Open(pid, start, false)
	if errors.Is(err, os.ErrProcessDone) {
		close(gone)
		return nil
	}
	if err != nil {
		return err
	}
	go func() {
		p.Wait()
		p.Close()
		close(gone)
	}()
	return nil
}
