package ctld

import (
	"sync"
	"testing"
	"time"
)

// TestReturnMemoryServesEveryRequest asks for memory to be returned from
// many goroutines at once: the rounds coalesce, and none is left waiting
// when the worker stops.
func TestReturnMemoryServesEveryRequest(t *testing.T) {
	f := NewFSM(quietLog())
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); f.returnMemory() }()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for f.freeing.Load() || len(f.freeAgain) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: worker running %v, %d requests waiting", f.freeing.Load(), len(f.freeAgain))
		}
		time.Sleep(time.Millisecond)
	}
}
