package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestClientWaitsOutTooManyRequests checks the answer to a 429: the client
// asks the same member again once Retry-After has passed, if that is
// within RetryFor, and otherwise returns the refusal at once, with the
// server's message and its Retry-After.
func TestClientWaitsOutTooManyRequests(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"user alice: more than 1 writes/s (burst 1); retry after 1 s"}`))
			return
		}
		w.Write([]byte(`{"self":"c1","leader":"c1","state":"Leader"}`))
	}))
	defer srv.Close()
	cl, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cl.RetryFor = 5 * time.Second
	if st, err := cl.Status(context.Background()); err != nil || st.Leader != "c1" || calls.Load() != 2 {
		t.Fatalf("%+v, %v after %d calls; want the second call's answer", st, err, calls.Load())
	}

	calls.Store(0)
	cl.RetryFor = 500 * time.Millisecond
	_, err = cl.Status(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter != time.Second ||
		!strings.Contains(ae.Message, "user alice") || calls.Load() != 1 {
		t.Fatalf("%#v after %d calls; want the 429 with its message and Retry-After at once (1 s is past RetryFor)", err, calls.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	tests := map[string]struct {
		header string
		want   time.Duration
	}{
		"seconds":            {"7", 7 * time.Second},
		"zero":               {"0", 0},
		"missing":            {"", time.Second},
		"unreadable":         {"soon", time.Second},
		"a date in the past": {"Mon, 02 Jan 2006 15:04:05 GMT", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := retryAfter(tc.header); got != tc.want {
				t.Fatalf("Retry-After %q: %s, want %s", tc.header, got, tc.want)
			}
		})
	}
}
