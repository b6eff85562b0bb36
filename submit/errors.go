package submit

import (
	"errors"
	"fmt"
	"strings"

	"corral/internal/getopt"
)

// Sentinel causes a caller may test with errors.Is. A *Error wraps one of
// them (or a getopt error, or a strconv error) where one applies.
var (
	// ErrHelp is returned by Parse for -h/--help; print Usage() and exit 0.
	ErrHelp = errors.New("help requested")
	// ErrVersion is returned by Parse for -V/--version; print the version
	// and exit 0.
	ErrVersion = errors.New("version requested")
	// ErrUnsupported marks a value of an option that corral does not take
	// (--nodes=2, --mem=0), the reason given.
	ErrUnsupported = errors.New("value not taken by corral")
	// ErrRefused marks a Slurm option that corral refuses, the reason
	// given: accepting it would mislead (see otherOptions).
	ErrRefused = errors.New("option refused by corral")
	// ErrNoScript marks a submission with neither a script path, nor --wrap,
	// nor a script on standard input.
	ErrNoScript = errors.New("no batch script")
	// ErrEmptyScript marks a script that is empty or only whitespace.
	ErrEmptyScript = errors.New("batch script is empty")
	// ErrNotBatchScript marks a script whose first line is not "#!...".
	ErrNotBatchScript = errors.New("not a batch script")
	// ErrScriptTooLarge marks a script over MaxScriptBytes.
	ErrScriptTooLarge = errors.New("batch script too large")
)

// Error is a submission the user must fix. Its message names the option or
// field and says what to do:
//
//	--mem=4X: unknown unit "X" (use K, M, G or T)
//	script "job.sh": This does not look like a batch script. ...
//	unknown option "--partiton" (did you mean --partition?)
//
// Errors from a #SBATCH or #CORRAL line carry the script's name, the line
// number and the line itself instead of the field:
//
//	script.sh:3: #SBATCH --mem=4X: unknown unit "X" (use K, M, G or T)
type Error struct {
	// Field is the option ("--mem") or the part of the request ("script")
	// that is wrong.
	Field string
	// Value is the value given to Field, when there is one.
	Value string
	// Message says what is wrong and what to do, without the field.
	Message string

	// File, Line and Directive locate an error found in a script's
	// #SBATCH (or #CORRAL) lines; Line is 0 for the command line.
	File      string
	Line      int
	Directive string

	// Err is the underlying cause, if any.
	Err error

	// grammar marks a command-line grammar error (from package getopt),
	// whose message already names the option, so Error does not repeat
	// Field in front of it.
	grammar bool
}

// grammarError wraps an error of the option grammar (unknown, ambiguous,
// missing or unexpected value); errors.As reaches the *getopt.Error.
func grammarError(err error) *Error {
	e := &Error{Message: err.Error(), Err: err, grammar: true}
	var ge *getopt.Error
	if errors.As(err, &ge) {
		e.Field = ge.Option
	}
	return e
}

// Error renders the message as shown above.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Directive, msg)
	}
	switch {
	case e.Field == "" || e.grammar:
		return msg
	case e.Value != "" && strings.HasPrefix(e.Field, "-"):
		return e.Field + "=" + e.Value + ": " + msg
	case e.Value != "":
		return fmt.Sprintf("%s %q: %s", e.Field, e.Value, msg)
	}
	return e.Field + ": " + msg
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// optionError builds the error for a bad value of an option.
func optionError(field, value string, cause error, format string, args ...any) *Error {
	return &Error{Field: field, Value: value, Message: fmt.Sprintf(format, args...), Err: cause}
}

// wrapValueError turns an error from one of the exported Parse* functions
// into an *Error for the option that was being applied, keeping its message
// but naming the option the user actually gave.
func wrapValueError(field, value string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Field: field, Value: value, Message: e.Message, Err: e.Err}
	}
	return &Error{Field: field, Value: value, Message: err.Error(), Err: err}
}
