package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// loginEnv is an environment of n lines of which the last one is
// different for each sample.
func loginEnv(n, sample int) []string {
	var env []string
	for i := 0; i < n-1; i++ {
		env = append(env, fmt.Sprintf("VAR_%02d=%s", i, strings.Repeat("v", 40+i)))
	}
	return append(env, fmt.Sprint("ZZ_SAMPLE=", sample))
}

// TestScriptsAndEnvironmentsOutOfLine checks that jobs with the same
// script share one blob, that environments that differ in one variable
// share every chunk but one, that the content reads back as it was
// submitted (inline or by key), and that the blobs go with the last job
// that used them.
func TestScriptsAndEnvironmentsOutOfLine(t *testing.T) {
	r := newReplica()
	const n = 50
	var jobs []JobSpec
	for i := 0; i < n; i++ {
		sp := spec(fmt.Sprint("j", i))
		sp.InlineEnv = &InlineEnv{Env: loginEnv(60, i)}
		jobs = append(jobs, sp)
	}
	res := r.Apply(entry(t, 1, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: jobs})).(*SubmitResult)
	s := r.s
	if len(res.Missing) != 0 || s.Jobs[n] == nil {
		t.Fatalf("submit: %+v", res)
	}
	chunks := len(envChunks(loginEnv(60, 0)))
	if chunks < 4 {
		t.Fatalf("a 60-line environment makes %d chunks, want several", chunks)
	}
	// One script; per job one environment and (at most) one chunk of its
	// own; the chunks without the sample shared by all.
	if got, most := len(s.blobs), 1+(chunks-1)+2*n; got > most {
		t.Errorf("%d blobs for %d jobs with one script and %d-chunk environments, want at most %d", got, n, chunks, most)
	}
	j := s.Jobs[7]
	if j.Spec.Script.Text() != "#!/bin/sh\necho hi\n" || !slices.Equal(j.Spec.Env.Lines(), loginEnv(60, 6)) {
		t.Errorf("job 7 reads back script %q and environment %v", j.Spec.Script.Text(), j.Spec.Env.Lines())
	}
	if j.Spec.Script != s.Jobs[1].Spec.Script {
		t.Error("two jobs with the same script hold two copies")
	}
	// A job naming its script and environment by key, the entry carrying
	// none of their content: they are the state's already.
	byKey := spec("by-key")
	byKey.RequestID = "by-key"
	byKey.Script, byKey.Env = &Blob{key: j.Spec.Script.key}, &Blob{key: j.Spec.Env.key}
	byKey.InlineScript = nil
	res = r.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: n + 1, Jobs: []JobSpec{byKey}})).(*SubmitResult)
	if got := s.Jobs[n+1]; got == nil || got.Spec.Env != j.Spec.Env || got.Spec.Script != j.Spec.Script {
		t.Fatalf("a job by key: %+v, want the blobs of job 7", res)
	}
	// A key the state does not hold and the entry does not carry: that
	// job is refused (the leader proposes it again with its content).
	lost := spec("lost")
	lost.RequestID = "lost"
	lost.Env = &Blob{key: envKey([]blobKey{textKey("GONE=1")})}
	res = r.Apply(entry(t, 3, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: n + 2, Jobs: []JobSpec{lost}})).(*SubmitResult)
	if !slices.Equal(res.Missing, []int{0}) || s.Jobs[n+2] != nil || !strings.Contains(res.Results[0].Error, "not known") {
		t.Fatalf("a job naming an unknown environment: %+v", res)
	}
	// Content that does not match its key is not taken.
	forged := spec("forged")
	forged.RequestID = "forged"
	forged.InlineScript = nil
	forged.Script = &Blob{key: textKey("#!/bin/sh\ntrue\n")}
	res = r.Apply(entry(t, 4, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: n + 3, Jobs: []JobSpec{forged},
		Blobs: []BlobRecord{{Key: textKey("#!/bin/sh\ntrue\n").String(), Text: "#!/bin/sh\nrm -rf ~\n"}}})).(*SubmitResult)
	if len(res.Missing) != 1 || s.HasBlob(textKey("#!/bin/sh\ntrue\n").String()) {
		t.Fatalf("a blob whose content is not its key's was taken: %+v", res)
	}
	if h := restoredCopy(t, r).Hash(); h != r.Hash() {
		t.Fatal("a snapshot round trip changes the state")
	}
	// All jobs cancelled and purged: no blob is left.
	var ids []uint64
	for id := range s.Jobs {
		ids = append(ids, id)
	}
	r.Apply(entry(t, 5, CmdCancelJobs, &CancelJobs{Now: t0, IDs: ids}))
	r.Apply(entry(t, 6, CmdPurgeJobs, &PurgeJobs{Now: tPurgeAt}))
	if len(s.Jobs) != 0 || len(s.blobs) != 0 {
		t.Errorf("after the purge: %d jobs and %d blobs left, want none", len(s.Jobs), len(s.blobs))
	}
}

// TestEnvChunksAreContentDefined checks that changing one variable of an
// environment changes one chunk and keeps the others.
func TestEnvChunksAreContentDefined(t *testing.T) {
	a, b := loginEnv(80, 1), loginEnv(80, 2)
	b[10] = "VAR_10=changed"
	ca, cb := envChunks(a), envChunks(b)
	same := 0
	for _, c := range cb {
		if slices.Contains(ca, c) {
			same++
		}
	}
	if same < len(cb)-2 {
		t.Errorf("two environments that differ in 2 lines share %d of %d chunks, want all but 2", same, len(cb))
	}
	if got := strings.Join(ca, envSep); got != strings.Join(a, envSep) {
		t.Error("the chunks do not add up to the environment")
	}
	for _, c := range ca {
		if len(c) > maxChunkBytes+200 {
			t.Errorf("a chunk of %d bytes", len(c))
		}
	}
}
