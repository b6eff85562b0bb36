package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file measures what issue 10 compares with Slurm: the controller's
// memory per pending job when users submit with the CLI, exporting their
// whole environment (as sbatch does by default).

// typicalEnv is a login shell's environment on a cluster's login node, of
// about 4 KB: the usual variables, a long LS_COLORS, module and
// toolchain paths. Each job adds SAMPLE=<k>, as a submission loop that
// exports its loop variable does, so no two jobs' environments are equal
// though they share almost all of it.
func typicalEnv(dir string) []string {
	colors := strings.Repeat("di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01:cd=40;33;01:", 30)
	modules := "/apps/modules/compilers:/apps/modules/mpi:/apps/modules/libs:/apps/modules/tools:/apps/modules/python"
	lib := "/apps/gcc/12.2.0/lib64:/apps/openmpi/4.1.5/lib:/apps/hdf5/1.14.1/lib:/apps/netcdf/4.9.2/lib:/apps/fftw/3.3.10/lib"
	env := []string{
		"HOME=" + dir, "USER=tester", "LOGNAME=tester", "SHELL=/bin/bash", "LANG=en_US.UTF-8", "TERM=xterm-256color",
		"PATH=/apps/gcc/12.2.0/bin:/apps/openmpi/4.1.5/bin:/apps/python/3.11/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"LS_COLORS=" + colors, "MODULEPATH=" + modules, "LD_LIBRARY_PATH=" + lib, "LIBRARY_PATH=" + lib,
		"LOADEDMODULES=gcc/12.2.0:openmpi/4.1.5:hdf5/1.14.1:netcdf/4.9.2:fftw/3.3.10:python/3.11",
		"MANPATH=/apps/gcc/12.2.0/share/man:/apps/openmpi/4.1.5/share/man:/usr/share/man",
		"PYTHONPATH=/apps/python/3.11/lib/python3.11/site-packages:/home/tester/lib/python",
		"HOSTNAME=login01.cluster.example.org", "MAIL=/var/mail/tester", "PWD=" + dir, "OLDPWD=" + dir, "SHLVL=2",
		"SSH_CLIENT=10.1.2.3 51234 22", "SSH_CONNECTION=10.1.2.3 51234 10.1.0.10 22", "SSH_TTY=/dev/pts/3",
		"XDG_SESSION_ID=4711", "XDG_RUNTIME_DIR=/run/user/1000", "XDG_DATA_DIRS=/usr/local/share:/usr/share",
		"HISTSIZE=10000", "HISTCONTROL=ignoredups", "EDITOR=vim", "PAGER=less", "LESSOPEN=| /usr/bin/lesspipe %s",
		"OMP_NUM_THREADS=1", "CC=gcc", "CXX=g++", "FC=gfortran", "MPICC=mpicc", "_=/usr/bin/sbatch",
		"CORRAL_ADDR=", // set by the caller
	}
	return env
}

// envMemFigures are what measureCLIJobMemory saw of one controller: its
// resident memory (MB) idle, after the first warm jobs and after all of
// them, and what that is per job: from idle, and past the warm jobs (the
// cost of one more job, without the start-up costs a first request makes).
type envMemFigures struct {
	warm, jobs                 int
	envBytes                   int
	idleMB, warmMB, heldMB     float64
	warmAnonMB, warmFile       float64
	heldAnonMB, heldFile       float64
	perJobKB, marginalPerJobKB float64
	// marginalAnonKB is marginalPerJobKB without the file pages: the
	// heap's share, without the pages of the Raft log's bbolt file that
	// writing it touched (which the kernel reclaims under pressure).
	marginalAnonKB float64
	took           time.Duration
}

// measureCLIJobMemory starts a one-voter controller process and submits
// n held jobs with `corral submit` processes (4 at a time), each exporting
// a typical environment; it reads the controller's resident memory idle,
// after the first warm jobs and after all n.
func measureCLIJobMemory(t testing.TB, warm, n int) envMemFigures {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	pid := c.ctlds[0].cmd.Process.Pid
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/bash\n#SBATCH --job-name=sample\n#SBATCH --ntasks=1\n#SBATCH --time=10:00\n./analyse \"$SAMPLE\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := typicalEnv(dir)
	base[len(base)-1] = "CORRAL_ADDR=" + c.addr
	f := envMemFigures{warm: warm, jobs: n, envBytes: len(strings.Join(base, "\n")) + len("SAMPLE=00000\n")}
	time.Sleep(2 * time.Second) // let start-up garbage go
	f.idleMB = procStatusMB(t, pid, "VmRSS")
	start := time.Now()
	submitWithCLI(t, dir, script, base, 0, warm)
	// The memory of the requests is returned once they stop (2 s).
	time.Sleep(5 * time.Second)
	f.warmMB = procStatusMB(t, pid, "VmRSS")
	f.warmAnonMB, f.warmFile = procStatusMB(t, pid, "RssAnon"), procStatusMB(t, pid, "RssFile")
	submitWithCLI(t, dir, script, base, warm, n)
	f.took = time.Since(start)
	st, err := c.client(t).Status(context.Background())
	if err != nil || st.Jobs["PENDING"] != n {
		t.Fatalf("status after %d submissions: %+v, %v", n, st, err)
	}
	time.Sleep(5 * time.Second)
	f.heldMB = procStatusMB(t, pid, "VmRSS")
	f.heldAnonMB, f.heldFile = procStatusMB(t, pid, "RssAnon"), procStatusMB(t, pid, "RssFile")
	f.perJobKB = (f.heldMB - f.idleMB) * 1024 / float64(n)
	f.marginalPerJobKB = (f.heldMB - f.warmMB) * 1024 / float64(n-warm)
	f.marginalAnonKB = (f.heldAnonMB - f.warmAnonMB) * 1024 / float64(n-warm)
	return f
}

// submitWithCLI runs `corral submit --hold script` for samples from to
// to-1, 4 at a time, each with env and its SAMPLE.
func submitWithCLI(t testing.TB, dir, script string, env []string, from, to int) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				cmd := exec.Command(corralBin, "submit", "--hold", script)
				cmd.Dir, cmd.Env = dir, append(append([]string{}, env...), "SAMPLE="+strconv.Itoa(k))
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("job %d: %v: %s", k, err, out)
					return
				}
			}
		}()
	}
	defer func() {
		close(next)
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}()
	for k := from; k < to; k++ {
		select {
		case next <- k:
		case err := <-errs:
			errs <- err
			return
		}
	}
}

func (f envMemFigures) String() string {
	return fmt.Sprintf("%d held jobs submitted with corral submit, %d-byte environment each: RSS idle %.1f MB, after %d jobs %.1f MB (%.1f anonymous, %.1f file), after %d %.1f MB (%.1f anonymous, %.1f file): %.2f KB per job from idle, %.2f KB per job past the first %d (%.2f KB anonymous); submitted in %s",
		f.jobs, f.envBytes, f.idleMB, f.warm, f.warmMB, f.warmAnonMB, f.warmFile, f.jobs, f.heldMB, f.heldAnonMB, f.heldFile, f.perJobKB, f.marginalPerJobKB, f.warm, f.marginalAnonKB, f.took.Round(time.Millisecond))
}

// TestControllerMemoryPerCLIJob is the small version of
// BenchmarkControllerMemoryPerCLIJob: past the first 1,000 jobs, 1,000 more
// cost the controller at most 5 KB of anonymous memory each (kept inline,
// their 3.7 KB environments cost more than 7 KB: in the state and in the
// log cache). 5, not 4: at 1,000 jobs the RSS steps of the heap's growth
// make the figure vary by ±0.3 KB between runs of one tree (3.8–4.4 KB
// measured), and the job record grew by 320 bytes with the multi-node and
// Slurm-option fields (BenchmarkMemoryPerPendingJobWithEnv, 1,528 → 1,848
// bytes of heap a job); the inline case stays well apart. The target
// itself (≤ 2 KB a job) is the benchmark's, at 20,000 jobs.
func TestControllerMemoryPerCLIJob(t *testing.T) {
	if testing.Short() {
		t.Skip("submits 2,000 jobs through the CLI")
	}
	f := measureCLIJobMemory(t, 1000, 2000)
	t.Log(f)
	if f.marginalAnonKB > 5 {
		t.Errorf("%.2f KB of anonymous controller memory per held job past the first 1,000, above 5 KB: the environments are kept per job (inline they cost more than 7 KB)", f.marginalAnonKB)
	}
}

// BenchmarkControllerMemoryPerCLIJob measures the controller's resident
// memory per held job submitted through the CLI with a typical 3.7 KB
// environment (issue 10's target: at most 2 KB), at 5,000 jobs or
// $CORRAL_ENVMEM_JOBS, the first 1,000 counted apart.
func BenchmarkControllerMemoryPerCLIJob(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("CORRAL_ENVMEM_JOBS")); err == nil && v > 1000 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		f := measureCLIJobMemory(b, 1000, n)
		b.Log(f)
		b.ReportMetric(f.perJobKB, "KB/job")
		b.ReportMetric(f.marginalPerJobKB, "marginal-KB/job")
		b.ReportMetric(f.marginalAnonKB, "marginal-anon-KB/job")
		b.ReportMetric(f.idleMB, "idle-RSS-MB")
		b.ReportMetric(f.heldMB, "held-RSS-MB")
		b.ReportMetric(f.heldAnonMB, "held-anon-MB")
		b.ReportMetric(f.heldFile, "held-file-MB")
	}
}
