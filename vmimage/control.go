package vmimage

import (
	"fmt"
	"strconv"
	"strings"
)

// EventKind names a control-channel line.
type EventKind int

// The control-channel events, in the order a guest sends them. Numbering is
// internal; the wire form is the line text (see the package documentation).
const (
	// EventStarted: init is about to exec the job script ("CORRAL STARTED").
	EventStarted EventKind = iota + 1
	// EventError: init could not run the job ("CORRAL ERROR <text>"); an
	// EventExit with code 127 follows.
	EventError
	// EventOOM: the guest's OOM killer killed a process while the job ran
	// ("CORRAL OOM"); an EventExit follows.
	EventOOM
	// EventExit: the job ended with Code ("CORRAL EXIT <code>"); the guest
	// powers off next.
	EventExit
	// EventReady: a guest booted for a warm start's snapshot is prepared
	// and waits for its job on the agent's port ("CORRAL READY").
	EventReady
)

func (k EventKind) String() string {
	switch k {
	case EventStarted:
		return "STARTED"
	case EventError:
		return "ERROR"
	case EventOOM:
		return "OOM"
	case EventExit:
		return "EXIT"
	case EventReady:
		return "READY"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one parsed control-channel line.
type Event struct {
	Kind EventKind
	// Code is the job's exit status for EventExit: 0–255, 128+N when a
	// signal N killed the script, 126/127 when it could not be executed.
	Code int
	// Text is the message of an EventError.
	Text string
}

// controlPrefix starts every control line.
const controlPrefix = "CORRAL "

// ParseControl parses one line read from the control port (ttyS3), with or
// without its line ending. It reports false for anything that is not a
// well-formed control line, so a reader can skip noise.
func ParseControl(line string) (Event, bool) {
	line = strings.TrimRight(line, "\r\n")
	rest, ok := strings.CutPrefix(line, controlPrefix)
	if !ok {
		return Event{}, false
	}
	word, arg, _ := strings.Cut(rest, " ")
	switch word {
	case "STARTED":
		if arg != "" {
			return Event{}, false
		}
		return Event{Kind: EventStarted}, true
	case "OOM":
		if arg != "" {
			return Event{}, false
		}
		return Event{Kind: EventOOM}, true
	case "READY":
		if arg != "" {
			return Event{}, false
		}
		return Event{Kind: EventReady}, true
	case "ERROR":
		return Event{Kind: EventError, Text: arg}, true
	case "EXIT":
		code, err := strconv.Atoi(arg)
		if err != nil || code < 0 || code > 255 || arg != strconv.Itoa(code) {
			return Event{}, false
		}
		return Event{Kind: EventExit, Code: code}, true
	}
	return Event{}, false
}

// String returns the event as the guest writes it, without "CORRAL ".
func (e Event) String() string {
	switch e.Kind {
	case EventExit:
		return fmt.Sprintf("EXIT %d", e.Code)
	case EventError:
		return "ERROR " + e.Text
	}
	return e.Kind.String()
}
