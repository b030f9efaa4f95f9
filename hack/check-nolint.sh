#!/usr/bin/env bash
# hack/check-nolint.sh — every //nolint:<linters> directive names only linters enabled in .golangci.yml.
# nolintlint (enabled there) reports directives that are unused or lack a linter or a reason, but it
# skips directives naming a linter that is not enabled, and golangci-lint only warns about unknown
# names; such a directive silences nothing and misleads the reader.
# Usage: hack/check-nolint.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The `- name` items of linters.enable.
mapfile -t enabled < <(awk '
  /^linters:/ { in_linters = 1; next }
  /^[^ #]/ { in_linters = 0 }
  in_linters && /^  enable:/ { in_enable = 1; next }
  in_enable && /^    - / { print $2; next }
  { in_enable = 0 }' .golangci.yml)
((${#enabled[@]})) || { echo "check-nolint: no linters.enable list in .golangci.yml" >&2; exit 1; }

bad=0
while IFS=: read -r file line text; do
  names=${text#*//nolint:}
  names=${names%%[!a-z0-9,-]*}
  IFS=, read -ra names <<<"$names"
  for n in "${names[@]}"; do
    if [[ " ${enabled[*]} " != *" $n "* ]]; then
      echo "$file:$line: //nolint names $n, which is not enabled in .golangci.yml" >&2
      bad=1
    fi
  done
done < <(git grep -n '//nolint:' -- '*.go' || true)
exit "$bad"
