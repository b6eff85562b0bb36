package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/noded/hardware"
)

// siteCluster is the cluster the site scripts run on: one controller and
// four node daemons (process runner): cn01 (batch: 16 CPUs, 8 GiB), gpu01
// (gpu: a fixture host with two H100s), fat01 (himem: 2 CPUs, 2 GiB) and
// train01 (training: 2 CPUs, 1 GiB, held by reservation "training" for
// user tester). The cluster has one matlab license and the test's mail
// program.
type siteCluster struct {
	*cluster
	t    *testing.T
	cl   *api.Client
	work string
	mail *mailSinks
	ids  map[string][]uint64 // job ids by script (a script submitted twice has two)
	bin  string              // holds the Slurm-named links to the binary
}

func startSiteCluster(t *testing.T) *siteCluster {
	gpuRoot, gpuFile := fixtureNode(t, hardware.FixtureHost{
		Sockets: 2, NodesPerSocket: 1, CoresPerNode: 8, ThreadsPerCore: 1, MemMBPerNode: 8 << 10,
		Distances: [][]int{{10, 21}, {21, 10}},
	}, nil, []api.GPU{
		{Index: 0, UUID: "GPU-aaaa", Model: "NVIDIA H100 80GB HBM3", MemMB: 81559, PCIBusID: "0000:1b:00.0", NUMANode: 0},
		{Index: 1, UUID: "GPU-bbbb", Model: "NVIDIA H100 80GB HBM3", MemMB: 81559, PCIBusID: "0000:43:00.0", NUMANode: 1},
	})
	s := &siteCluster{t: t, mail: newMailSinks(t), ids: map[string][]uint64{}}
	s.cluster = startControllers(t, 1, "--partitions", "batch*,gpu,himem,training")
	s.leader(t, 15*time.Second)
	s.startNode(t, "cn01", "--cpus", "16", "--mem", "8G", "--partitions", "batch", "--tmp", "4G")
	s.startNode(t, "gpu01", "--topology-root", gpuRoot, "--gpus-file", gpuFile, "--partitions", "gpu")
	s.startNode(t, "fat01", "--cpus", "2", "--mem", "2G", "--partitions", "himem")
	s.startNode(t, "train01", "--cpus", "2", "--mem", "1G", "--partitions", "training")
	s.waitNodes(t, 4)
	s.cl = s.client(t)
	s.work, s.bin = t.TempDir(), t.TempDir()
	for _, alias := range []string{"sbatch", "scontrol", "squeue"} {
		if err := os.Symlink(corralBin, filepath.Join(s.bin, alias)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir("testdata/scripts")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata/scripts", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(s.work, e.Name()), string(b)) // the scripts as they are
	}
	if err := os.Mkdir(filepath.Join(s.work, "run-dir"), 0o777); err != nil {
		t.Fatal(err)
	}
	s.run("config", "set", "Licenses=matlab:1", "MailProg="+filepath.Join(s.mail.dir, "mailprog"))
	s.slurm(0, "scontrol", "create", "reservation", "ReservationName=training", "StartTime=now", "Duration=60",
		"Users=tester", "Nodes=train01")
	return s
}

// slurm runs one of Slurm's commands (a link to the binary) in the work
// directory as user tester, and fails the test unless it exits with code.
func (s *siteCluster) slurm(code int, name string, args ...string) ioResult {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.work
	cmd.Env = append(os.Environ(), "CORRAL_ADDR="+s.addr, "USER=tester")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ioResult{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
	if err != nil && cmd.ProcessState == nil || r.code != code {
		s.t.Fatalf("%s %s: exit %d (%v), want %d; stderr %q", name, strings.Join(args, " "), r.code, err, code, r.stderr)
	}
	return r
}

// run runs a CLI command (corral's, or a Slurm alias through corral) in
// the work directory and returns its standard output.
func (s *siteCluster) run(args ...string) string {
	s.t.Helper()
	out, err := cli(s.t, s.addr, s.work, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// sbatch submits script with extra options before it, as a user types
// them, and records the job's id.
func (s *siteCluster) sbatch(script string, extra ...string) uint64 {
	s.t.Helper()
	out := s.slurm(0, "sbatch", append(append([]string{"--parsable"}, extra...), script)...).stdout
	id := mustID(s.t, strings.TrimSpace(out))
	s.ids[script] = append(s.ids[script], id)
	return id
}

func (s *siteCluster) job(id uint64) api.Job {
	s.t.Helper()
	j, err := s.cl.Job(context.Background(), id, true)
	if err != nil {
		s.t.Fatalf("job %d: %v", id, err)
	}
	return *j
}

// out reads a file of the work directory; "" when it does not exist.
func (s *siteCluster) out(name string) string { return readFileOr(filepath.Join(s.work, name)) }

// interval reads "start T" and "end T" lines (date +%s.%N) of a file.
func (s *siteCluster) interval(name string) (start, end float64) {
	for _, line := range strings.Split(s.out(name), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "start":
				start = v
			case "end":
				end = v
			}
		}
	}
	return start, end
}

// TestSiteScripts runs batch scripts written as university HPC
// documentation writes them (e2e/testdata/scripts), unchanged, on one
// cluster, all at once, and checks that each option had its effect:
// arrays and throttles, dependencies, singletons, memory forms, GPUs,
// licenses, a signal before the time limit, a requeue with append mode,
// deadlines, holds, begin times, mail, input files, exports, directories,
// nice and comments, a reservation, a timeout, overcommit, propagated
// limits, scratch space, and --test-only.
func TestSiteScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 processes and runs 30 jobs")
	}
	s := startSiteCluster(t)
	s.submitAll()
	s.steer()
	s.waitAllEnded(90 * time.Second)
	for name, check := range siteChecks {
		t.Run(name, func(t *testing.T) {
			s.t = t
			check(s)
		})
	}
}

// submitAll submits every script as its header comment says to.
func (s *siteCluster) submitAll() {
	for _, name := range []string{"01-hello-serial.sh", "02-openmp.sh", "03-array.sh", "04-array-throttle.sh", "05-array-step.sh",
		"09-mem-per-cpu.sh", "10-mem-gigabytes.sh", "11-whole-node-memory.sh", "12-gpu.sh", "13-gpu-cpus-per-gpu.sh",
		"14-license.sh", "14-license.sh", "15-signal-checkpoint.sh", "16-requeue-append.sh", "18-held.sh", "19-begin-later.sh",
		"20-mail.sh", "21-input-file.sh", "23-chdir-separate-error.sh", "24-comment-nice.sh", "25-reservation.sh",
		"26-timeout.sh", "28-overcommit.sh", "29-propagate.sh", "30-scratch.sh", "08-singleton.sh", "08-singleton.sh"} {
		s.sbatch(name)
	}
	stage1 := s.sbatch("06-pipeline-stage1.sh")
	s.sbatch("06-pipeline-stage2.sh", "--dependency=afterok:"+strconv.FormatUint(stage1, 10))
	failed := s.sbatch("07-failing.sh")
	s.sbatch("07-cleanup-afternotok.sh", "--dependency=afternotok:"+strconv.FormatUint(failed, 10))
	s.sbatch("27-kill-invalid-dep.sh", "--dependency=afterok:"+strconv.FormatUint(failed, 10), "--kill-on-invalid-dep=yes")
	s.sbatch("17-deadline.sh", "--deadline=now+30seconds")
	s.sbatch("22-export.sh", "--export=ALL,SAMPLE=run42")
}

// steer does what the scripts' users do while they run: release the held
// job, and requeue the resumable one once it runs.
func (s *siteCluster) steer() {
	held, resumable := s.ids["18-held.sh"][0], s.ids["16-requeue-append.sh"][0]
	waitFor(s.t, s.cluster, "the held job waiting", 20*time.Second, func() bool {
		return s.job(held).Reason == api.ReasonJobHeldUser
	})
	s.slurm(0, "scontrol", "release", strconv.FormatUint(held, 10))
	waitFor(s.t, s.cluster, "the resumable job running", 30*time.Second, func() bool {
		return s.job(resumable).State == api.StateRunning && strings.Contains(s.out(fmt.Sprintf("resumable-%d.out", resumable)), "run 0 starting")
	})
	s.slurm(0, "scontrol", "requeue", strconv.FormatUint(resumable, 10))
}

// waitAllEnded waits until every job submitted has ended.
func (s *siteCluster) waitAllEnded(limit time.Duration) {
	waitFor(s.t, s.cluster, "every script's job to end", limit, func() bool {
		jobs := allJobs(s.t, s.cl)
		for _, ids := range s.ids {
			for _, id := range ids {
				if j, ok := jobs[id]; !ok || !j.State.Terminal() || j.IsArrayPending() {
					return false
				}
			}
		}
		for _, j := range jobs {
			if !j.State.Terminal() {
				return false // an array's tasks
			}
		}
		return true
	})
}

// expectJob checks that the script's jobs ended as want, with output
// file outFmt (a format taking the job id) matching every pattern.
func (s *siteCluster) expectJob(script string, want api.JobState, outFmt string, patterns ...string) api.Job {
	s.t.Helper()
	id := s.ids[script][0]
	j := s.job(id)
	if j.State != want {
		s.t.Errorf("%s: job %d ended %s (%s, exit %d), want %s", script, id, j.State, j.Message, j.ExitCode, want)
	}
	if outFmt == "" {
		return j
	}
	out := s.out(fmt.Sprintf(outFmt, id))
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			s.t.Errorf("%s: job %d's output %q does not match %q", script, id, out, p)
		}
	}
	return j
}

// overlap reports whether two intervals of time overlap.
func overlap(a0, a1, b0, b1 float64) bool { return a0 < b1 && b0 < a1 }

// siteChecks checks each script's effect once every job ended.
var siteChecks = map[string]func(s *siteCluster){
	"serial job": func(s *siteCluster) {
		id := s.ids["01-hello-serial.sh"][0]
		s.expectJob("01-hello-serial.sh", api.StateCompleted, "hello-%d.out", fmt.Sprintf(`Hello from job %d \(hello\) on cn01`, id), "Working directory: "+regexp.QuoteMeta(s.work))
	},
	"OpenMP threads from --cpus-per-task": func(s *siteCluster) {
		s.expectJob("02-openmp.sh", api.StateCompleted, "omp-%d.out", `OMP_NUM_THREADS=4 cpus_on_node=4 mem_per_node=400\b`)
	},
	"array": func(s *siteCluster) {
		a := s.ids["03-array.sh"][0]
		for task := 1; task <= 4; task++ {
			if out := s.out(fmt.Sprintf("sweep_%d_%d.out", a, task)); !strings.Contains(out, fmt.Sprintf("task %d of 4 (array %d, min 1 max 4)", task, a)) {
				s.t.Errorf("task %d wrote %q", task, out)
			}
		}
	},
	"array throttle %2": func(s *siteCluster) {
		var iv [][2]float64
		for task := 0; task <= 5; task++ {
			a, b := s.interval(fmt.Sprintf("throttled_%d.out", task))
			if a == 0 || b == 0 {
				s.t.Fatalf("task %d left no start and end: %q", task, s.out(fmt.Sprintf("throttled_%d.out", task)))
			}
			iv = append(iv, [2]float64{a, b})
		}
		for _, x := range iv {
			running := 0
			for _, y := range iv {
				if y[0] <= x[0] && x[0] < y[1] {
					running++
				}
			}
			if running > 2 {
				s.t.Errorf("%d tasks ran at once (at %.2f), want at most 2: %v", running, x[0], iv)
			}
		}
	},
	"array with a step": func(s *siteCluster) {
		for _, task := range []int{0, 5, 10} {
			if out := s.out(fmt.Sprintf("stepped_%d.out", task)); strings.TrimSpace(out) != fmt.Sprintf("index=%d step=5", task) {
				s.t.Errorf("task %d wrote %q", task, out)
			}
		}
		if s.out("stepped_1.out") != "" {
			t := s.t
			t.Error("task 1 ran; the step is 5")
		}
	},
	"afterok pipeline": func(s *siteCluster) {
		s.expectJob("06-pipeline-stage2.sh", api.StateCompleted, "stage2-%d.out", `stage 2 read 42`)
		_, done1 := s.intervalOf("06-pipeline-stage1.sh", "stage1-%d.out", "stage 1 done at ")
		start2, _ := s.intervalOf("06-pipeline-stage2.sh", "stage2-%d.out", "stage 2 read 42 at ")
		if start2 < done1 {
			s.t.Errorf("stage 2 ran at %.2f, before stage 1 was done at %.2f", start2, done1)
		}
	},
	"afternotok cleanup, kill-on-invalid-dep": func(s *siteCluster) {
		j := s.expectJob("07-failing.sh", api.StateFailed, "fragile-%d.out", "something went wrong")
		if j.ExitCode != 3 {
			s.t.Errorf("the failing job's exit code is %d, want 3", j.ExitCode)
		}
		s.expectJob("07-cleanup-afternotok.sh", api.StateCompleted, "cleanup-%d.out", "cleaning up after a failure")
		if j := s.expectJob("27-kill-invalid-dep.sh", api.StateCancelled, ""); s.out(fmt.Sprintf("orphan-%d.out", j.ID)) != "" {
			s.t.Error("the job whose dependency failed ran")
		}
	},
	"singleton": func(s *siteCluster) {
		a := s.ids["08-singleton.sh"]
		a0, a1 := s.interval(fmt.Sprintf("db-update-%d.out", a[0]))
		b0, b1 := s.interval(fmt.Sprintf("db-update-%d.out", a[1]))
		if a1 == 0 || b1 == 0 || overlap(a0, a1, b0, b1) {
			s.t.Errorf("the two singletons ran [%.2f, %.2f] and [%.2f, %.2f]: they overlap or did not run", a0, a1, b0, b1)
		}
	},
	"memory forms": func(s *siteCluster) {
		s.expectJob("09-mem-per-cpu.sh", api.StateCompleted, "permem-%d.out", `mem_per_node=400 ntasks=2 cpus=2\b`)
		s.expectJob("10-mem-gigabytes.sh", api.StateCompleted, "onegig-%d.out", `mem_per_node=1024\b`)
		s.expectJob("11-whole-node-memory.sh", api.StateCompleted, "allmem-%d.out", `mem_per_node=2048 node=fat01`)
	},
	"scratch space": func(s *siteCluster) {
		j := s.expectJob("30-scratch.sh", api.StateCompleted, "scratch-%d.out", `scratch on cn01: input`)
		if j.Spec.TmpMB != 2048 {
			s.t.Errorf("30-scratch.sh: the job holds %d MiB of scratch space, want 2048", j.Spec.TmpMB)
		}
		// cn01 offers 4G: more is refused at submit, naming the limit.
		r := s.slurm(1, "sbatch", "--tmp=5G", "30-scratch.sh")
		if want := "Requested node configuration is not available: the job asks for 5120 MiB of scratch space (--tmp); the largest node of partition batch (cn01) has 4096 MiB"; !strings.Contains(r.stderr, want) {
			s.t.Errorf("sbatch --tmp=5G: %q; want %q", r.stderr, want)
		}
	},
	"GPUs": func(s *siteCluster) {
		s.expectJob("12-gpu.sh", api.StateCompleted, "gpu1-%d.out", `CUDA_VISIBLE_DEVICES=GPU-(aaaa|bbbb) cpus=2\b`)
		s.expectJob("13-gpu-cpus-per-gpu.sh", api.StateCompleted, "gpu2-%d.out", `gpus=GPU-aaaa,GPU-bbbb cpus=8\b`)
	},
	"one license between two jobs": func(s *siteCluster) {
		a := s.ids["14-license.sh"]
		a0, a1 := s.interval(fmt.Sprintf("matlab-%d.out", a[0]))
		b0, b1 := s.interval(fmt.Sprintf("matlab-%d.out", a[1]))
		if a1 == 0 || b1 == 0 || overlap(a0, a1, b0, b1) {
			s.t.Errorf("the two matlab jobs ran [%.2f, %.2f] and [%.2f, %.2f] with one license", a0, a1, b0, b1)
		}
	},
	"signal before the time limit": func(s *siteCluster) {
		j := s.expectJob("15-signal-checkpoint.sh", api.StateCompleted, "ckpt-%d.out", "caught SIGUSR1 at [0-9]+, writing checkpoint")
		if s.out(fmt.Sprintf("ckpt-%d.dat", j.ID)) != "state\n" {
			s.t.Error("no checkpoint file")
		}
	},
	"requeue with append": func(s *siteCluster) {
		j := s.expectJob("16-requeue-append.sh", api.StateCompleted, "resumable-%d.out", "(?s)^run 0 starting\n.*run 1 starting\nrun 1 done\n$")
		if j.Restarts != 1 {
			s.t.Errorf("restarts %d, want 1", j.Restarts)
		}
	},
	"deadline": func(s *siteCluster) {
		if j := s.expectJob("17-deadline.sh", api.StateDeadline, ""); j.Reason != api.ReasonDeadline || s.out(fmt.Sprintf("conference-%d.out", j.ID)) != "" {
			s.t.Errorf("the late job: reason %s; it must not run", j.Reason)
		}
	},
	"hold and release": func(s *siteCluster) {
		s.expectJob("18-held.sh", api.StateCompleted, "waiting-%d.out", "released and ran")
	},
	"begin time": func(s *siteCluster) {
		j := s.expectJob("19-begin-later.sh", api.StateCompleted, "later-%d.out", "started at")
		if j.StartTime.Sub(j.SubmitTime) < 2500*time.Millisecond {
			s.t.Errorf("started %s after its submission, want at least 3 s (--begin=now+3)", j.StartTime.Sub(j.SubmitTime))
		}
	},
	"mail": func(s *siteCluster) {
		id := s.ids["20-mail.sh"][0]
		waitFor(s.t, s.cluster, "both notifications mailed", 20*time.Second, func() bool {
			return len(filterSubject(s.mail.mailed(s.t), fmt.Sprintf("Job_id=%d ", id))) == 2
		})
		got := filterSubject(s.mail.mailed(s.t), fmt.Sprintf("Job_id=%d ", id))
		if got[0].event != api.MailBegin || got[1].event != api.MailEnd || got[0].to != "researcher@example.org" ||
			!strings.HasSuffix(got[1].subject, "COMPLETED, ExitCode 0") {
			s.t.Errorf("mailed %+v", got)
		}
	},
	"input file": func(s *siteCluster) {
		s.expectJob("21-input-file.sh", api.StateCompleted, "stdin-%d.out", `alpha=0.25 beta=17`)
	},
	"export": func(s *siteCluster) {
		s.expectJob("22-export.sh", api.StateCompleted, "exported-%d.out", `SAMPLE=run42 HOME_SET=yes`)
	},
	"chdir and a separate error file": func(s *siteCluster) {
		id := s.ids["23-chdir-separate-error.sh"][0]
		s.expectJob("23-chdir-separate-error.sh", api.StateCompleted, "")
		if out, errs := s.out(fmt.Sprintf("run-dir/out-tidy-%d.txt", id)), s.out(fmt.Sprintf("run-dir/err-tidy-%d.txt", id)); out != "in run-dir\n" || errs != "a warning\n" {
			s.t.Errorf("output %q, errors %q", out, errs)
		}
	},
	"nice, comment and QoS": func(s *siteCluster) {
		j := s.expectJob("24-comment-nice.sh", api.StateCompleted, "background-%d.out", `qos=normal`)
		if j.Spec.Nice != 50 || j.Spec.Comment != "low priority rerun" || j.Spec.QOS != "normal" {
			s.t.Errorf("nice %d, comment %q, qos %q", j.Spec.Nice, j.Spec.Comment, j.Spec.QOS)
		}
	},
	"reservation": func(s *siteCluster) {
		j := s.expectJob("25-reservation.sh", api.StateCompleted, "training-%d.out", `node=train01`)
		if j.Spec.Reservation != "training" {
			s.t.Errorf("the job names reservation %q", j.Spec.Reservation)
		}
	},
	"time limit": func(s *siteCluster) {
		j := s.expectJob("26-timeout.sh", api.StateTimeout, "overrun-%d.out", "starting a long computation")
		if strings.Contains(s.out(fmt.Sprintf("overrun-%d.out", j.ID)), "never printed") {
			s.t.Error("the job ran past its limit")
		}
	},
	"overcommit": func(s *siteCluster) {
		s.expectJob("28-overcommit.sh", api.StateCompleted, "light-%d.out", `ntasks=8 cpus=1\b`)
	},
	"propagated limit": func(s *siteCluster) {
		var l unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
			s.t.Fatal(err)
		}
		// The CLI's parent is this test: its soft limit is the job's.
		s.expectJob("29-propagate.sh", api.StateCompleted, "limits-%d.out", fmt.Sprintf(`nofile=%d\b`, l.Cur))
	},
	"test-only": func(s *siteCluster) {
		before := len(allJobs(s.t, s.cl))
		r := s.slurm(0, "sbatch", "--test-only", "01-hello-serial.sh")
		if !regexp.MustCompile(`sbatch: Job [0-9]+ to start at \S+ using 1 processors on nodes cn01 in partition batch`).MatchString(r.stderr) {
			s.t.Errorf("sbatch --test-only said %q", r.stderr)
		}
		if after := len(allJobs(s.t, s.cl)); after != before {
			s.t.Errorf("--test-only stored a job: %d jobs, then %d", before, after)
		}
	},
}

// intervalOf reads the time after prefix in the output of script's job.
func (s *siteCluster) intervalOf(script, outFmt, prefix string) (float64, float64) {
	out := s.out(fmt.Sprintf(outFmt, s.ids[script][0]))
	i := strings.Index(out, prefix)
	if i < 0 {
		s.t.Fatalf("%s: no %q in %q", script, prefix, out)
	}
	v, _ := strconv.ParseFloat(strings.Fields(out[i+len(prefix):])[0], 64)
	return v, v
}
