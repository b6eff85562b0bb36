package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientKeepsRotating checks that the client moves on from a failing
// member every time, also once it has tried each member already: one
// member answers 503 for ever (a follower without a leader), the other
// once, then serves.
func TestClientKeepsRotating(t *testing.T) {
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"no leader is elected yet; retry in a moment"}`, http.StatusServiceUnavailable)
	}))
	defer stuck.Close()
	var calls atomic.Int32
	recovering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, `{"error":"electing"}`, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"self":"c2","leader":"c2","state":"Leader"}`))
	}))
	defer recovering.Close()
	cl, err := NewClient(stuck.URL + "," + recovering.URL)
	if err != nil {
		t.Fatal(err)
	}
	cl.RetryFor = 5 * time.Second
	for i := 0; i < 3; i++ {
		st, err := cl.Status(context.Background())
		if err != nil || st.Leader != "c2" {
			t.Fatalf("call %d: %+v, %v; want c2's answer (the client must move past the member that keeps failing)", i, st, err)
		}
	}
}
