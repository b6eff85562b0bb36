// Package submit turns what a user typed into a job request: sbatch's
// command-line options and the #SBATCH (or #CORRAL) directive lines of a
// batch script, merged as sbatch merges them, into a validated api.JobSpec.
//
// It owns the sbatch option set and its value grammars: time limits
// (ParseTimeLimit, FormatDuration, FormatTimeLimit), memory sizes
// (ParseMemory), --begin times (ParseBegin), dependencies
// (ParseDependency), job arrays (ParseArray), generic resources
// (ParseGres), --export (ExportEnv), and the output and error file
// patterns a node expands when it starts a job (ExpandPath, OutputPaths).
//
// The pipeline of Parse is:
//
//	args ──getopt──▶ command-line options ──check alone (first pass)
//	        │
//	        ▼
//	script (path │ --wrap │ stdin) ──checks (#!, size, text)──▶ #SBATCH lines
//	        │
//	        ▼
//	defaults ◀─ directives in order ◀─ command line in order ─▶ JobSpec
//
// so a command-line option overrides the same option in the script, and a
// later occurrence overrides an earlier one, exactly as with sbatch.
//
// Parse ends with ValidateSpec, the stateless rules every job request must
// follow. The controller runs the same function on every request it
// receives, whoever sent it, so the limits here (MaxScriptBytes, MaxCPUs,
// MaxTimeLimit, MaxNice, MaxArrayIndex, MaxEnvBytes, ...) are the only
// copy: the CLI may refuse early, the server always refuses. Arrays are
// checked and sized arithmetically (api.BuildIndexSet), never by listing
// their indexes.
//
// It never talks to the controller, never checks that a partition, account
// or dependency job exists (the controller decides that), and never reads
// the process's environment, clock, working directory or standard input by
// itself: everything comes in a Context, which the CLI fills. The only I/O
// it does on its own is ReadScriptFile of the script when Context.ReadFile
// is nil: a regular file, read no further than MaxScriptBytes+1.
//
// Errors a user can fix are *Error values naming the option or field and
// what to do; those found on a directive line carry "file:line: #SBATCH
// ...:" in front. Sentinels (ErrHelp, ErrVersion, ErrRefused, ErrUnsupported, ErrNoScript,
// ErrEmptyScript, ErrNotBatchScript, ErrScriptTooLarge) can be tested with
// errors.Is.
//
// The entry point is Parse; Usage returns its help text.
package submit
