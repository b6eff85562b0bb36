package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSallocAndInteractiveSrun gets allocations from the command line on
// a process-runner node: salloc running srun in its allocation (the job's
// variables set here, the allocation given up when the command exits),
// srun outside any job (an allocation for one step, stdin reaching its
// tasks), and srun --pty driven through a pseudo-terminal: a command typed,
// its output read, the shell's exit code srun's.
func TestSallocAndInteractiveSrun(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "2")
	dir := t.TempDir()
	r := runBinary(t, corralBin, c.addr, dir, "salloc", "-n", "2", "--", corralBin, "srun", "--label", "sh", "-c", "echo $SLURM_PROCID in $SLURM_JOB_ID")
	if r.code != 0 || !strings.Contains(r.stderr, "salloc: Granted job allocation") || !strings.Contains(r.stderr, "salloc: Relinquishing job allocation") {
		t.Fatalf("salloc: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var id string
	fmt.Sscanf(r.stderr[strings.Index(r.stderr, "Granted job allocation ")+len("Granted job allocation "):], "%s", &id)
	for _, want := range []string{"0: 0 in " + id + "\n", "1: 1 in " + id + "\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("salloc's srun printed %q, want a line %q", r.stdout, want)
		}
	}
	if r := runBinary(t, corralBin, c.addr, dir, "salloc", "sh", "-c", "exit 5"); r.code != 5 {
		t.Errorf("salloc sh -c 'exit 5' exited %d: %s", r.code, r.stderr)
	}
	cmd := exec.Command(corralBin, "srun", "-n", "2", "sh", "-c", "read line; echo $SLURM_PROCID got $line")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CORRAL_ADDR="+c.addr, "USER=tester")
	cmd.Stdin = strings.NewReader("hello\n")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "0 got hello\n") || !strings.Contains(string(out), "1 got hello\n") {
		t.Errorf("srun outside a job: %v, %q", err, out)
	}
	t.Run("pty", func(t *testing.T) { srunPty(t, c.addr, dir) })
}

// srunPty runs `srun --pty sh` on a pseudo-terminal: the test types a
// command and an exit, as a person would.
func srunPty(t *testing.T, addr, dir string) {
	master, slave := openPTY(t)
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, "srun", "--pty", "sh")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CORRAL_ADDR="+addr, "USER=tester", "TERM=dumb", "PS1=$ ")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The allocation may take a moment: type once the shell answers.
	waitLine := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the terminal closed before %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q on the terminal", want)
			}
		}
	}
	waitLine("Granted job allocation")
	// Type until the shell answers: what is typed before the step's
	// terminal is up is echoed here and read by the shell later.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Fprintf(master, "echo ready-$((40+2))\n")
ready:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the terminal closed: srun ended %v", cmd.Wait())
			}
			if strings.Contains(l, "ready-42") && !strings.Contains(l, "echo") {
				break ready
			}
		case <-tick.C:
			fmt.Fprintf(master, "echo ready-$((40+2))\n")
		case <-ctx.Done():
			t.Fatal("the shell never answered on the terminal")
		}
	}
	fmt.Fprintf(master, "echo pty-$((6*7)) $SLURM_STEP_ID; tty\n")
	waitLine("pty-42 0")
	waitLine("/dev/pts/")
	fmt.Fprintf(master, "exit 3\n")
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("srun --pty sh ended %v, want exit status 3", err)
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, m.Fd(), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY))
	if errno != 0 {
		t.Fatal(errno)
	}
	unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	return m, os.NewFile(fd, "pty")
}
