package sim

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"corral/ctld/sched"
)

// This file runs a simulation while its trace is still being read: `corral
// sim` would otherwise spend a fifth of its time reading the trace before
// the first pass, with the second core idle.

// RunSWF reads a trace from r as ReadSWF does and simulates it as Run
// does, with the same result or the same error (Result.Trace is left
// empty). When r can seek, the simulation starts once the header is read,
// and a goroutine reads the rest of the jobs ahead of it. That holds while
// the file lists its jobs in queue order (submit time, then job number),
// as the archive's traces do, and no header line after the first job
// changes the machine or the epoch; otherwise RunSWF seeks back and reads
// the whole trace first. A trace that cannot seek is read whole first.
func RunSWF(r io.Reader, opts Options) (Result, error) {
	sk, ok := r.(io.Seeker)
	var at int64
	if ok {
		var err error
		at, err = sk.Seek(0, io.SeekCurrent)
		ok = err == nil
	}
	if ok {
		res, err := runStreamed(r, opts)
		if !errors.Is(err, errReread) {
			return res, err
		}
		if _, err := sk.Seek(at, io.SeekStart); err != nil {
			return Result{}, fmt.Errorf("reading the trace again: %w", err)
		}
	}
	tr, err := ReadSWF(r)
	if err != nil {
		return Result{}, err
	}
	return Run(tr, opts)
}

// errReread says that the trace must be read whole before it is
// simulated (see RunSWF).
var errReread = errors.New("the trace must be read whole first")

// errFeed ends a simulation whose feed failed (feed.failed).
var errFeed = errors.New("the trace could not be read")

// runStreamed is RunSWF on a trace it may read again: errReread asks for
// that.
func runStreamed(r io.Reader, opts Options) (Result, error) {
	began := time.Now()
	policy, err := sched.ParsePolicy(string(opts.Policy))
	if err != nil {
		return Result{}, errReread // its error, after the trace's
	}
	sc, done, err := swfLines(r)
	if err != nil {
		return Result{}, err
	}
	f := &feed{sc: sc, done: done, chunks: make(chan []simJob, 64), quit: make(chan struct{})}
	// The header, up to the first job line.
	for f.sc.Scan() {
		f.line++
		text := strings.TrimSpace(f.sc.Text())
		if text == "" {
			continue
		}
		if text[0] != ';' {
			f.first = text
			break
		}
		if err := f.header.readHeader(text[1:], f.line); err != nil {
			done()
			return Result{}, err
		}
	}
	m, err := newMachine(&f.header, opts)
	if f.first == "" || err != nil {
		// No job line (or an error reading one), or no machine: rare
		// enough to read again.
		done()
		return Result{}, errReread
	}
	f.queue = queuer{machine: m}
	go f.read()
	s, err := newSimulation(jobList{}, m.nodes, f.header.UnixStartTime, policy, opts)
	if err == nil {
		s.feed = f
		err = s.run()
	}
	if errors.Is(err, ErrStopped) {
		close(f.quit)
	}
	// What the reader found first comes first: an error in the trace, or
	// a reason to read it again.
	for range f.chunks {
	}
	if f.failed() {
		return Result{}, f.err
	}
	if err != nil {
		return Result{}, err
	}
	res := summarize(&s.jobs, m.procs, !opts.NoOutcomes)
	res.Policy, res.Skipped, res.Passes, res.IdlePasses = policy, f.queue.skipped, s.passes, s.idle
	res.Wall = time.Since(began)
	return res, nil
}

// feed reads a trace's jobs after its header in a goroutine of its own and
// sends them, converted by queue, in chunks of chunkLen.
type feed struct {
	sc   *bufio.Scanner
	done func()
	// line is the number of the last line read; first the first job
	// line, read with the header.
	line  int
	first string
	// header is the trace's header as read before the first job.
	header Trace
	queue  queuer
	chunks chan []simJob
	// quit, once closed, stops the reading.
	quit chan struct{}
	// err, set before chunks is closed: the trace's first error in
	// ReadSWF's and queueJobs' order, or errReread.
	err error
}

// failed reports whether the trace holds an error or must be read again;
// only once chunks is closed.
func (f *feed) failed() bool { return f.err != nil }

// read parses the job lines and sends them on; it closes chunks when the
// trace ends, fails or must be read again, or when quit closes.
func (f *feed) read() {
	defer close(f.chunks)
	defer f.done()
	chunk := make([]simJob, 0, chunkLen)
	// last is the last job queued (the simulation may be changing the
	// copy sent).
	var last simJob
	queued := false
	// queueErr is queueJobs' error; the lines after it are still parsed,
	// since a parse error anywhere comes first.
	var queueErr error
	text := f.first
	for {
		if text != "" && text[0] == ';' {
			if reread, err := f.lateHeader(text[1:]); err != nil || reread {
				f.err = cmp.Or(err, errReread)
				return
			}
		} else if text != "" {
			sw, err := parseSWFJob(text, f.line)
			if err != nil {
				f.err = err
				return
			}
			if queueErr == nil {
				var sj simJob
				var ok bool
				sj, ok, queueErr = f.queue.add(&sw)
				if ok {
					if queued && !inQueueOrder(&last, &sj) {
						f.err = errReread
						return
					}
					chunk = append(chunk, sj)
					last, queued = sj, true
					if len(chunk) == chunkLen && !f.send(chunk) {
						return
					}
					if len(chunk) == chunkLen {
						chunk = make([]simJob, 0, chunkLen)
					}
				}
			}
		}
		if !f.sc.Scan() {
			break
		}
		f.line++
		text = strings.TrimSpace(f.sc.Text())
	}
	if err := f.sc.Err(); err != nil {
		f.err = fmt.Errorf("reading trace after line %d: %w", f.line, err)
		return
	}
	if queueErr == nil {
		queueErr = repeatedJob(f.queue.numbers)
	}
	if f.err = queueErr; f.err == nil && len(chunk) > 0 {
		f.send(chunk)
	}
}

// send hands a chunk to the simulation; false when quit closed.
func (f *feed) send(chunk []simJob) bool {
	select {
	case f.chunks <- chunk:
		return true
	case <-f.quit:
		return false
	}
}

// lateHeader reads a header line that follows a job line: it asks for the
// trace to be read again when it changes the machine or the epoch.
func (f *feed) lateHeader(text string) (bool, error) {
	h := f.header
	if err := h.readHeader(text, f.line); err != nil {
		return false, err
	}
	return h.MaxProcs != f.header.MaxProcs || h.MaxNodes != f.header.MaxNodes || h.UnixStartTime != f.header.UnixStartTime, nil
}

// inQueueOrder reports whether b may follow a in the queue: a later submit
// time, or the same one and a job number not below (an equal one is a
// repeat, which the reader reports at the end).
func inQueueOrder(a, b *simJob) bool {
	return a.out.Submit < b.out.Submit || a.out.Submit == b.out.Submit && a.out.ID <= b.out.ID
}

// upcoming returns the first job not yet submitted, nil when none is left,
// taking the feed's next chunk when the jobs at hand are all submitted.
func (s *simulation) upcoming() *simJob {
	for s.next == s.jobs.len() && s.feed != nil && !s.fed {
		c, ok := <-s.feed.chunks
		if !ok {
			s.fed = true
			break
		}
		s.jobs.add(c)
	}
	if s.next < s.jobs.len() {
		return s.jobs.at(s.next)
	}
	return nil
}
