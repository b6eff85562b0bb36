#!/usr/bin/env bash
# Runs every native Go fuzz target in the repository for FUZZTIME each:
#   make fuzz FUZZTIME=10m     (default 30s)
#   make test                  runs each for FUZZTIME=3s after the unit tests
# A target that finds a crasher fails the run; Go saves the input under the
# package's testdata/fuzz/<Target>/, where every later `go test` replays it
# (commit it with the fix: it is then a regression test). The summary gives
# each target's executions per second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fuzztime=${FUZZTIME:-30s}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
only=${FUZZ:-}   # a regular expression: run only the targets it matches
# FUZZPARALLEL=N runs N fuzzing workers per target (default: one per CPU).
parallel=()
[ -z "${FUZZPARALLEL:-}" ] || parallel=(-test.parallel "$FUZZPARALLEL")
# Where go test keeps the inputs fuzzing generated, per package (its
# -test.fuzzcachedir): the runs below go on from the same cache.
fuzzcache=$("$go" env GOCACHE)/fuzz

targets=$(git ls-files --cached --others --exclude-standard '*_test.go' | while read -r f; do
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$(dirname "$f") |" || true
done | sort -u)
[ -n "$targets" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }

# inputs DIR: how many corpus files DIR holds (0 when it does not exist).
inputs() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }

# fuzzbin DIR: the fuzzing test binary of the package in DIR, built once
# per run with go test -c -fuzz; every target of DIR runs it (a go test
# -fuzz per target linked the same binary again each time, seconds apiece).
# Its name holds the package's import path, which the fuzz cache is keyed
# by.
bins=$(mktemp -d)
fuzzbin() {
	local bin="$bins/$(echo "$1" | tr / _).test"
	if [ ! -x "$bin" ]; then
		"$go" test -c -fuzz . -o "$bin" "./$1" || return 1
		"$go" list "./$1" >"$bin.importpath" || return 1
	fi
	echo "$bin"
}

summary=$(mktemp)
failed=()
while read -r dir name; do
	if [ -n "$only" ] && ! [[ $name =~ $only ]]; then
		continue
	fi
	echo "fuzz: $name (./$dir) for $fuzztime"
	log=$(mktemp)
	corpus="$dir/testdata/fuzz/$name"
	before=$(inputs "$corpus")
	status=ok
	if ! bin=$(fuzzbin "$dir" 2>"$log"); then
		cat "$log"
		echo "fuzz: $name: building the fuzzing binary of ./$dir failed" >&2
		failed+=("$dir $name")
		printf '%-28s %-22s %-7s\n' "$name" "./$dir" FAILED >>"$summary"
		rm -f "$log"
		continue
	fi
	for try in 1 2; do
		# As go test -fuzz runs it: in the package's directory, where
		# testdata/fuzz/ holds the seed corpus and takes crashers.
		(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$fuzztime" \
			-test.fuzzcachedir="$fuzzcache/$(cat "$bin.importpath")" -test.paniconexit0 -test.timeout=10m \
			"${parallel[@]}") >"$log" 2>&1 && break
		grep -v '^fuzz: elapsed' "$log" | tail -40
		if [ "$(inputs "$corpus")" != "$before" ] || [ "$try" = 2 ]; then
			status=FAILED
			failed+=("$dir $name")
			break
		fi
		# No new input was saved: the fuzzing engine itself failed (a
		# worker starved on a loaded machine, say), not the target.
		echo "fuzz: $name failed without saving an input; running it once more"
	done
	# The last progress line gives the total executions and the elapsed
	# time (e.g. "10m0s"); its own rate covers only its last interval. A
	# short run over a large cached corpus may end while still gathering
	# its baseline, with no such line: the row then has no figures.
	{ grep '^fuzz: elapsed: .*execs:' "$log" || true; } | tail -1 | awk -v name="$name" -v dir="./$dir" -v status="$status" '{
		t = $3; sub(",", "", t); secs = 0; n = ""
		for (i = 1; i <= length(t); i++) {
			c = substr(t, i, 1)
			if (c ~ /[0-9.]/) { n = n c; continue }
			secs += n * (c == "h" ? 3600 : (c == "m" ? 60 : 1)); n = ""
		}
		execs = $5
		printf "%-28s %-22s %-7s %12d %8d %8s\n", name, dir, status, execs, (secs > 0 ? execs / secs : 0), t
	}' >>"$summary"
	grep -q "^$name  *\./$dir " "$summary" || printf '%-28s %-22s %-7s\n' "$name" "./$dir" "$status" >>"$summary"
	rm -f "$log"
done <<<"$targets"

printf '\n%-28s %-22s %-7s %12s %8s %8s\n' TARGET PACKAGE STATUS EXECS EXECS/S ELAPSED
cat "$summary"
rm -f "$summary"
rm -rf "$bins"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]} (crashers are in their packages' testdata/fuzz/)" >&2
	exit 1
fi
