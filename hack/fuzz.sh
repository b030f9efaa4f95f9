#!/usr/bin/env bash
# hack/fuzz.sh — run every Go fuzz target (func FuzzXxx(*testing.F)) of the module for FUZZTIME
# each, one after another: `go test -fuzz` takes one target per run. The targets are found with
# `go test -list`, so a new one is picked up without editing this file. Go's own output is kept
# (its last "fuzz: elapsed: ..., execs: ..." line per target is repeated in a summary at the end).
# Every target runs even when one fails; the exit status is non-zero if any failed. A failing
# input is written by go to <package>/testdata/fuzz/<target>/, where it stays as a regression seed
# (plain `go test` runs those seeds and the f.Add ones).
# Usage: [FUZZTIME=60s] hack/fuzz.sh [regexp]   (regexp narrows the targets, default all)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

: "${FUZZTIME:=60s}"
filter=${1:-.}

# targets — "<package> <target>" for every fuzz target, one a line. `go test -list` prints a
# package's matching names before its "ok <package>" line.
targets() {
  local out line names=()
  out=$(go test -run '^$' -list '^Fuzz' ./...) || { printf '%s\n' "$out" >&2; die "go test -list failed"; }
  while IFS= read -r line; do
    case $line in
      Fuzz*) names+=("$line") ;;
      ok*)
        local pkg name
        pkg=$(awk '{ print $2 }' <<<"$line")
        for name in "${names[@]}"; do echo "$pkg $name"; done
        names=()
        ;;
    esac
  done <<<"$out"
}

mapfile -t all < <(targets)
selected=()
for t in "${all[@]}"; do
  [[ ${t#* } =~ $filter ]] && selected+=("$t")
done
((${#selected[@]})) || die "no fuzz target matches ${filter@Q}"
log "fuzzing ${#selected[@]} targets for $FUZZTIME each"

summary=() failed=()
start=$SECONDS
for t in "${selected[@]}"; do
  pkg=${t% *} name=${t#* }
  log "$name ($pkg)"
  logfile=$(mktemp)
  status=0
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$logfile" || status=$?
  last=$(grep '^fuzz: elapsed:' "$logfile" | tail -n1 || true)
  # go test -fuzz can end with "context deadline exceeded" when -fuzztime runs out while it is
  # still minimizing a new (not failing) input: no failing input is written then. That is the
  # clock, not a finding; a real finding always says "Failing input written to".
  if ((status)) && grep -q 'context deadline exceeded' "$logfile" && ! grep -q 'Failing input written to' "$logfile"; then
    log "$name: the fuzz time ran out during minimization (no failing input): counted as a pass"
    status=0
  fi
  rm -f "$logfile"
  if ((status)); then
    failed+=("$name")
    summary+=("FAIL $name ($pkg): ${last:-no executions}")
  else
    summary+=("ok   $name ($pkg): $last")
  fi
done

log "summary ($((SECONDS - start))s):"
printf '  %s\n' "${summary[@]}" >&2
((${#failed[@]} == 0)) || die "fuzzing failed: ${failed[*]}"
