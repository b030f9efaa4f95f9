#!/usr/bin/env bash
# hack/critest/images.sh — build offline substitutes for the public images a test suite pulls (Debian's
# dynamic busybox + citool, + agnhost and nnp built from the kubernetes module for the node conformance
# suite) and push them under their ORIGINAL names; skipped when the registry already holds this recipe.
# Called by `hack/critest.sh images` (RECIPE=critest, critest v1.37.0's images) and by
# hack/node-conformance.sh (RECIPE=node-conformance, the images of test/utils/image/manifest.go that
# NodeConformance specs run; AGNHOST and NNP name the binaries), which set the env: DOCKER_HOST (an engine
# that reaches the registry through regproxy), REGISTRY_ADDR, REGISTRY_DIR, CITOOL.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${DOCKER_HOST:?}" "${REGISTRY_ADDR:?}" "${REGISTRY_DIR:?}" "${CITOOL:?}"
RECIPE=${RECIPE:-critest}

E=registry.k8s.io/e2e-test-images
G=gcr.io/k8s-staging-cri-tools
P=public.ecr.aws/docker/library
ARCH=$(go env GOARCH)

# recipe_* — every image: img NAME[,MORE-TAGS] HOOK [Dockerfile instruction...]. In list mode
# (MODE=list) img only prints the names.
recipe_critest() {
  img "$E/busybox:1.29-2" tools 'CMD ["sh"]' # critest's default image for containers
  # critest's PID-namespace specs grep /proc/1/cmdline for "master process", as real nginx shows.
  img "$E/nginx:1.14-2" nginx 'ENV PORT=80' 'ENTRYPOINT ["/usr/sbin/nginx", "master process"]'
  img "$G/hostnet-nginx-$ARCH:latest" nginx 'ENV PORT=12003' 'ENTRYPOINT ["/usr/sbin/nginx", "master process"]'
  img "$E/httpd:2.4.39-4" httpd 'ENV PORT=80' 'ENTRYPOINT ["/usr/local/apache2/bin/httpd"]'
  img "$E/nonewprivs:1.3" nonewprivs 'ENTRYPOINT ["/usr/local/bin/nonewprivs"]'
  img "$G/test-image-user-uid:latest" - 'USER 1002' 'CMD ["sh"]'
  img "$G/test-image-user-username:latest" - 'USER www-data' 'CMD ["sh"]'
  img "$G/test-image-user-uid-group:latest" - 'USER 1003:1004' 'CMD ["sh"]'
  img "$G/test-image-user-username-group:latest" - 'USER www-data:1004' 'CMD ["sh"]'
  img "$G/test-image-predefined-group:latest" group 'USER 1000' 'CMD ["sh"]'
  local i
  for i in 1 2 3 latest; do img "$G/test-image-$i:latest" - 'CMD ["sh"]'; done
  img "$G/test-image-tags:1,$G/test-image-tags:2,$G/test-image-tags:3" - 'CMD ["sh"]'
  img "$G/test-image-tag:test" - 'CMD ["sh"]'
  img "$G/test-image-tag:all" - 'CMD ["sh"]'
  # Sandbox images: our binary's default, and critest's "same image from two registries".
  img registry.k8s.io/pause:3.10 pause 'ENTRYPOINT ["/pause"]'
  img registry.k8s.io/pause:3.9,k8s.gcr.io/pause:3.9 pause 'ENTRYPOINT ["/pause"]'
  # critest -benchmark lists these.
  img "$P/busybox:1,$P/busybox:1.35.0-glibc,$P/busybox:1-uclibc,$P/busybox:1-glibc,$P/busybox:1-musl" - 'CMD ["sh"]'
}

# The node conformance suite's images (k8s.io/kubernetes test/utils/image/manifest.go at KUBELET_VERSION):
# agnhost as its Dockerfile lays it out (/agnhost, agnhost-2, /uploads, user-defined-in-image and
# group-defined-in-image, bash, curl, OpenBSD's nc, the HTTPS key pair), kitten and nautilus (agnhost with their pictures),
# busybox, glibc-dns-testing, nonroot (USER 1234), nonewprivs (nnp, set-uid), nginx, and the pause image
# kubelet 1.37 names.
recipe_node_conformance() {
  img "$E/agnhost:2.66.1,$E/agnhost:2.55" agnhost 'ENTRYPOINT ["/agnhost"]' 'CMD ["pause"]'
  img "$E/kitten:1.8" kitten 'ENTRYPOINT ["/agnhost"]' 'CMD ["test-webserver"]'
  img "$E/nautilus:1.8" nautilus 'ENTRYPOINT ["/agnhost"]' 'CMD ["test-webserver"]'
  img "$E/busybox:1.37.0-2" tools 'CMD ["sh"]'
  # Debian with glibc's resolver (`hostname -f`), as the real one (bookworm-slim) is.
  img "$E/glibc-dns-testing:2.1.1" glibc 'CMD ["sh"]'
  img "$E/nonroot:1.5" - 'USER 1234' 'CMD ["sh"]'
  img "$E/nonewprivs:1.4" nnp 'CMD ["nnp"]'
  img "$E/nginx:1.27.0-2,$E/nginx:1.28.0-2" nginx 'ENV PORT=80' 'ENTRYPOINT ["/usr/sbin/nginx", "master process"]'
  img registry.k8s.io/pause:3.10.2 pause 'ENTRYPOINT ["/pause"]'
}

recipe() {
  case $RECIPE in
    critest) recipe_critest ;;
    node-conformance) recipe_node_conformance ;;
    *) die "unknown RECIPE $RECIPE (critest or node-conformance)" ;;
  esac
}

# Hooks: add to the rootfs $1. Debian's busybox has no ipcs (critest's HostIpc specs run `ipcs -m`),
# pgrep (its exec timeout spec) or nmeter (the node conformance suite's lifecycle specs time starts
# with it), so the busybox images get citool's.
hook_tools() {
  rm -f "$1/bin/"{ipcs,pgrep,nmeter} && cp "$CITOOL" "$1/bin/ipcs" && ln "$1/bin/ipcs" "$1/bin/pgrep" && ln "$1/bin/ipcs" "$1/bin/nmeter"
}
hook_pause() { cp "$CITOOL" "$1/pause"; }
hook_nginx() { cp "$CITOOL" "$1/usr/sbin/nginx"; }
hook_httpd() { mkdir -p "$1/usr/local/apache2/bin" && cp "$CITOOL" "$1/usr/local/apache2/bin/httpd"; }
hook_nonewprivs() { install -m 4755 "$CITOOL" "$1/usr/local/bin/nonewprivs"; }
hook_agnhost() {
  hook_tools "$1" # the real image's busybox has nmeter, which the suite runs in it too
  cp "${AGNHOST:?}" "$1/agnhost" && ln -s agnhost "$1/agnhost-2" && mkdir -p "$1/uploads"
  # The HTTPS server's pair (agnhost's porter/localhost.*, beside the binary); bash, curl and OpenBSD's nc,
  # which the suite's specs run in it (the real image has Alpine's): Debian's, with their libraries.
  cp "$(dirname "$AGNHOST")"/localhost.{crt,key} "$1/"
  cp /usr/bin/curl "$1/usr/bin/curl" && with_libs "$1" /usr/bin/curl
  cp /bin/bash "$1/bin/bash" && with_libs "$1" /bin/bash
  rm "$1/bin/nc" && dpkg-deb --fsys-tarfile "$(debian_deb netcat-openbsd)" | tar -xO ./bin/nc.openbsd >"$1/bin/nc"
  chmod 755 "$1/bin/nc" && with_libs "$1" "$1/bin/nc"
  echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$1/etc/passwd"
  printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$1/etc/group"
  install -d -o 1000 -g 1000 "$1/home/user-defined-in-image"
}
hook_kitten() { hook_agnhost "$1" && cp "$(dirname "$AGNHOST")"/kitten/* "$1/"; }
hook_nautilus() { hook_agnhost "$1" && cp "$(dirname "$AGNHOST")"/nautilus/* "$1/"; }
hook_glibc() { printf 'hosts: files dns\n' >"$1/etc/nsswitch.conf"; }
hook_nnp() { install -m 4755 "${NNP:?}" "$1/usr/local/bin/nnp"; }
hook_group() {
  echo 'default-user:x:1000:1000::/home/default-user:/bin/sh' >>"$1/etc/passwd"
  printf 'default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n' >>"$1/etc/group"
  install -d -o 1000 -g 1000 "$1/home/default-user"
}

# debian_deb PKG — Debian's package PKG (this machine's release), downloaded once into the cache. The
# images use the *dynamic* busybox (busybox-static runs applets in-process from sh, which defeats critest's
# masked-path spec) and netcat-openbsd (agnhost's nc: the node conformance suite sends UDP with `nc -u`,
# which busybox's has not).
debian_deb() {
  local pkg=$1 dir=$DOCKPIN_CACHE/critest debs
  mkdir -p "$dir"
  debs=("$dir/${pkg}"_*.deb)
  if [[ ! -f ${debs[-1]} ]]; then
    log "downloading Debian's $pkg package"
    (cd "$dir" && { apt-get download -qq "$pkg" || { apt-get update -qq && apt-get download -qq "$pkg"; }; }) >&2
    debs=("$dir/${pkg}"_*.deb)
  fi
  echo "${debs[-1]}"
}

# with_libs ROOT BIN — copy into ROOT the shared libraries (and loader) BIN links, at their host paths.
with_libs() {
  local lib
  for lib in $(ldd "$2" | grep -oE '/[^ ]+'); do
    mkdir -p "$1${lib%/*}" && cp -L "$lib" "$1$lib"
  done
}

# make_base DEB DIR — a minimal rootfs: busybox and its libraries, one hard link per applet (a
# masked /bin/ls must not mask /bin/sh), passwd/group with the users critest's images have.
make_base() {
  local root=$2 a
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,root,tmp,var/run,proc,sys,dev,home}
  chmod 1777 "$root/tmp"
  dpkg-deb --fsys-tarfile "$1" | tar -xO ./bin/busybox >"$root/bin/busybox"
  chmod 755 "$root/bin/busybox"
  with_libs "$root" "$root/bin/busybox"
  for a in $("$root/bin/busybox" --list); do
    [[ -e $root/bin/$a ]] || ln "$root/bin/busybox" "$root/bin/$a"
  done
  printf '%s\n' root:x:0:0:root:/root:/bin/sh daemon:x:1:1:daemon:/usr/sbin:/bin/false \
    www-data:x:33:33:www-data:/var/www:/bin/false nobody:x:65534:65534:nobody:/nonexistent:/bin/false >"$root/etc/passwd"
  printf '%s\n' root:x:0: daemon:x:1: www-data:x:33: users:x:100: nogroup:x:65534: >"$root/etc/group"
}

# img NAMES HOOK CHANGE... — build (docker import) one image, tag it with every name in NAMES.
img() {
  local names first hook=$2 root name changes=()
  IFS=, read -ra names <<<"$1"
  shift 2
  if [[ ${MODE:-} == list ]]; then printf '%s\n' "${names[@]}"; return; fi
  first=${names[0]}
  root=$WORK/rootfs
  rm -rf "$root" && cp -a "$WORK/base" "$root"
  [[ $hook == - ]] || "hook_$hook" "$root"
  echo "$first" >"$root/image-name" # every image different, like the real ones
  for c in "$@"; do changes+=(--change "$c"); done
  tar --numeric-owner -C "$root" -c . | docker import "${changes[@]}" - "$first" >/dev/null
  for name in "${names[@]:1}"; do docker tag "$first" "$name"; done
}

# in_registry NAME — the registry serves NAME (it stores proxied names without their host).
in_registry() {
  local ref=${1#*/}
  curl -fs -o /dev/null -I -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://$REGISTRY_ADDR/v2/${ref%:*}/manifests/${ref##*:}"
}

main() {
  local deb key stamp=$REGISTRY_DIR/$RECIPE-images.stamp names name absent=0 bins=("$CITOOL")
  [[ $RECIPE != node-conformance ]] || bins+=("${AGNHOST:?}" "${NNP:?}" /usr/bin/curl /bin/bash "$(debian_deb netcat-openbsd)")
  deb=$(debian_deb busybox)
  key=$(cat "${BASH_SOURCE[0]}" "${bins[@]}" "$deb" | sha256sum | cut -c1-16)
  mapfile -t names < <(MODE=list recipe)
  for name in "${names[@]}"; do in_registry "$name" || { absent=1; break; }; done
  if [[ $absent == 0 && -f $stamp && $(<"$stamp") == "$key" ]]; then
    log "$RECIPE images (recipe $key) already in the registry at $REGISTRY_ADDR"
    return
  fi
  WORK=$(mktemp -d /tmp/dockpin-critest-images.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  log "building ${#names[@]} substitute $RECIPE images (recipe $key, $(basename "$deb"))"
  make_base "$deb" "$WORK/base"
  recipe
  log "built; pushing"
  printf '%s\n' "${names[@]}" | xargs -P 8 -I{} docker push -q {} >/dev/null
  docker rmi "${names[@]}" >/dev/null
  for name in "${names[@]}"; do in_registry "$name" || die "$name did not reach the registry"; done
  echo "$key" >"$stamp"
  log "pushed ${#names[@]} images to $REGISTRY_ADDR"
  [[ $RECIPE != critest ]] || log "(critest's digest-pinned test image cannot be made offline)"
}

main "$@"
