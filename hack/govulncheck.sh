#!/usr/bin/env bash
# hack/govulncheck.sh — govulncheck ./... against an offline vulnerability database; exits non-zero
# when our code calls a known vulnerability (govulncheck's own exit status).
# vuln.go.dev is not needed: the module golang.org/x/vulndb (from the Go module proxy) carries the
# database's OSV records (data/osv/*.json) and cmd/indexdb, which builds govulncheck's v1 layout
# (index/db.json, index/modules.json, ID/<id>.json) from them. The database is built once per
# VULNDB_VERSION (lib.sh) into $DOCKPIN_CACHE/vulndb/; bump VULNDB_VERSION for newer records
# (go list -m golang.org/x/vulndb@latest).
# Findings reachable from our code fail the run unless hack/govulncheck-accepted.txt lists them
# with a reason; an accepted ID that is no longer reported is named so the list stays short.
# Usage: hack/govulncheck.sh [govulncheck args...]   (default ./...)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

: "${VULNDB_DIR:=$DOCKPIN_CACHE/vulndb/$VULNDB_VERSION}"

# build_db — build the v1 database for VULNDB_VERSION into VULNDB_DIR unless it is there.
build_db() {
  [[ -f $VULNDB_DIR/index/db.json ]] && return
  local src tmp
  log "building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION"
  # Outside our module, so the download leaves go.mod and go.sum alone.
  src=$(cd / && go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')
  [[ -d $src/data/osv ]] || die "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv"
  mkdir -p "$(dirname "$VULNDB_DIR")"
  tmp=$(mktemp -d "$VULNDB_DIR.tmp.XXXXXX")
  if ! timed "$TOOLS_BIN/indexdb" -vulns "$src/data/osv" -out "$tmp"; then
    rm -rf "$tmp"
    die "indexdb failed"
  fi
  mv "$tmp" "$VULNDB_DIR"
}

hack/install-tools.sh govulncheck indexdb >/dev/null
build_db
(($#)) || set -- ./...
log "govulncheck $GOVULNCHECK_VERSION, database golang.org/x/vulndb@$VULNDB_VERSION ($(find "$VULNDB_DIR/ID" -name '*.json' | wc -l) entries)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$TOOLS_BIN/govulncheck" -db "file://$VULNDB_DIR" "$@" >"$out" || rc=$?
# The whole report (call stacks) only when something is wrong; else its summary lines.
if ((rc != 0 && rc != 3)); then cat "$out"; fi
grep -E '^(Vulnerability #[0-9]+:|Your code is affected|This scan also found|No vulnerabilities found)' "$out" || true
# 3 is govulncheck's "vulnerabilities found"; anything else non-zero is a failure to run.
((rc == 0 || rc == 3)) || die "govulncheck failed (exit $rc)"
accepted=$HACK_DIR/govulncheck-accepted.txt
# IDs in the symbol results: reachable from our code.
mapfile -t found < <(awk '/^=== Symbol Results ===/ { on = 1; next } /^=== / { on = 0 }
  on && /^Vulnerability #[0-9]+: / { print $3 }' "$out" | sort -u)
mapfile -t ok < <(awk '!/^#/ && NF { print $1 }' "$accepted" | sort -u)
new=$(comm -23 <(printf '%s\n' "${found[@]}" | sed '/^$/d') <(printf '%s\n' "${ok[@]}"))
stale=$(comm -13 <(printf '%s\n' "${found[@]}" | sed '/^$/d') <(printf '%s\n' "${ok[@]}"))
[[ -z $stale ]] || log "no longer reported, remove from $(basename "$accepted"): $(echo "$stale" | tr '\n' ' ')"
if [[ -n $new ]]; then
  cat "$out"
  die "reachable vulnerabilities not in $(basename "$accepted"): $(echo "$new" | tr '\n' ' ')"
fi
log "govulncheck: ${#found[@]} reachable, all accepted in $(basename "$accepted") with their reasons"
