package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"corral/api"
)

// TestPassPriorityIsPriority checks that the pass's priority, computed
// with what the jobs share hoisted and the zero-weight factors left out,
// is Priority's for every job, under weights with some factors off, QoS of
// several priorities, partition tiers and a fair-share function.
func TestPassPriorityIsPriority(t *testing.T) {
	for seed := range uint64(7) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 3))
			s := benchScene(20, 500)
			s.Config = api.DefaultSchedConfig()
			w := &s.Config.Weights
			for _, f := range []*int64{&w.Age, &w.Fairshare, &w.QOS, &w.Partition, &w.JobSize} {
				// The last seed sets every weight to 0: priorities are
				// the jobs' own.
				if r.IntN(3) == 0 || seed == 6 {
					*f = 0
				} else {
					*f = int64(r.IntN(20_000))
				}
			}
			s.QOS = map[string]*api.QOS{}
			for i, q := range api.DefaultQOS() {
				q.Priority = int64(i * r.IntN(100))
				s.QOS[q.Name] = &q
			}
			for i := range s.Partitions {
				s.Partitions[i].PriorityTier = r.IntN(4)
			}
			s.Fairshare = func(account, user string) float64 { return float64(len(account)+len(user)) / 20 }
			names := []string{"", "guaranteed", "burstable", "besteffort"}
			total := totalCPUs(s.Nodes)
			pp := newPassPriority(s)
			for _, j := range s.Pending {
				j.Spec.QOS = names[int(j.ID)%len(names)]
				j.Spec.Nice = int(j.ID % 7)
				j.Priority = int64(j.ID % 5)
				j.Spec.Priority = 0
				if j.ID%11 == 0 {
					j.Spec.Priority = int64(j.ID) // fixed by an operator (--priority)
				}
				if got, want := pp.of(j), Priority(j, s, total).Priority; got != want {
					t.Fatalf("job %d: pass priority %d, Priority %d", j.ID, got, want)
				}
			}
		})
	}
}
