package hardware

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// maxWarnings caps how many of ghw's warnings an error quotes.
const maxWarnings = 3

// warningLog is an slog.Handler that keeps ghw's warnings for one Discover
// call, so that they end up in the returned error instead of on stderr.
type warningLog struct {
	mu   sync.Mutex
	msgs []string
}

var _ slog.Handler = (*warningLog)(nil)

func (w *warningLog) logger() *slog.Logger { return slog.New(w) }

// Enabled keeps warnings and errors; ghw's info and debug lines are noise
// here.
func (w *warningLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (w *warningLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

func (w *warningLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warningLog) WithGroup(string) slog.Handler      { return w }

// suffix renders the first few warnings as "; ghw warned: a; b (and 2
// more)", or "" when there were none.
func (w *warningLog) suffix() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) == 0 {
		return ""
	}
	shown := w.msgs[:min(len(w.msgs), maxWarnings)]
	s := "; ghw warned: " + strings.Join(shown, "; ")
	if rest := len(w.msgs) - len(shown); rest > 0 {
		s += fmt.Sprintf(" (and %d more)", rest)
	}
	return s
}
