#!/usr/bin/env bash
# hack/shellcheck.sh — shellcheck every shell script under hack/, .ci/ and packaging/: the *.sh files and the
# files without an extension whose shebang names sh or bash (.ci/run, hack/runc-oom-wrapper/runc).
# Installs Debian's shellcheck with apt-get when it is missing and we are root.
# Usage: hack/shellcheck.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

# scripts — the tracked shell scripts under hack/ and .ci/, one a line.
scripts() {
  local f shebang='^#!(/usr/bin/env |/bin/|/usr/bin/)(ba)?sh( |$)'
  while IFS= read -r f; do
    if [[ $f == *.sh ]]; then
      echo "$f"
    elif [[ ${f##*/} != *.* && $(head -n1 "$f") =~ $shebang ]]; then
      echo "$f"
    fi
  done < <(git ls-files hack .ci packaging)
}

if ! command -v shellcheck >/dev/null 2>&1; then
  ((EUID == 0)) || die "shellcheck is missing; install it (apt-get install shellcheck) or run as root"
  ensure_apt shellcheck
fi

mapfile -t files < <(scripts)
((${#files[@]})) || die "no shell scripts found"
log "shellcheck $(shellcheck --version | awk '$1 == "version:" { print $2 }'): ${#files[@]} scripts"
# -x follows the `. lib.sh` lines (their `# shellcheck source=` paths are relative to the repo root).
shellcheck -x "${files[@]}"
