#!/usr/bin/env bash
# hack/critest/images.sh — build offline substitutes for the public images critest v1.37.0 pulls
# (Debian's dynamic busybox + citool) and push them under their ORIGINAL names; skipped when the
# registry already holds this recipe. Called by `hack/critest.sh images`, which sets the env:
# DOCKER_HOST (an engine that reaches the registry through regproxy), REGISTRY_ADDR, REGISTRY_DIR, CITOOL.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${DOCKER_HOST:?}" "${REGISTRY_ADDR:?}" "${REGISTRY_DIR:?}" "${CITOOL:?}"

E=registry.k8s.io/e2e-test-images
G=gcr.io/k8s-staging-cri-tools
P=public.ecr.aws/docker/library
ARCH=$(go env GOARCH)

# recipe — every image: img NAME[,MORE-TAGS] HOOK [Dockerfile instruction...]. In list mode
# (MODE=list) img only prints the names.
recipe() {
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

# Hooks: add to the rootfs $1. Debian's busybox has neither ipcs (HostIpc specs run `ipcs -m`)
# nor pgrep (the exec timeout spec), so the image critest runs commands in gets citool's.
hook_tools() { rm -f "$1/bin/"{ipcs,pgrep} && cp "$CITOOL" "$1/bin/ipcs" && ln "$1/bin/ipcs" "$1/bin/pgrep"; }
hook_pause() { cp "$CITOOL" "$1/pause"; }
hook_nginx() { cp "$CITOOL" "$1/usr/sbin/nginx"; }
hook_httpd() { mkdir -p "$1/usr/local/apache2/bin" && cp "$CITOOL" "$1/usr/local/apache2/bin/httpd"; }
hook_nonewprivs() { install -m 4755 "$CITOOL" "$1/usr/local/bin/nonewprivs"; }
hook_group() {
  echo 'default-user:x:1000:1000::/home/default-user:/bin/sh' >>"$1/etc/passwd"
  printf 'default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n' >>"$1/etc/group"
  install -d -o 1000 -g 1000 "$1/home/default-user"
}

# busybox_deb — Debian's *dynamic* busybox package, downloaded once into the cache. (busybox-static
# runs applets in-process from sh, which defeats critest's masked-path spec.)
busybox_deb() {
  local dir=$DOCKPIN_CACHE/critest debs
  mkdir -p "$dir"
  debs=("$dir"/busybox_*.deb)
  if [[ ! -f ${debs[-1]} ]]; then
    log "downloading Debian's busybox package"
    (cd "$dir" && { apt-get download -qq busybox || { apt-get update -qq && apt-get download -qq busybox; }; }) >&2
    debs=("$dir"/busybox_*.deb)
  fi
  echo "${debs[-1]}"
}

# make_base DEB DIR — a minimal rootfs: busybox and its libraries, one hard link per applet (a
# masked /bin/ls must not mask /bin/sh), passwd/group with the users critest's images have.
make_base() {
  local root=$2 a lib
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,root,tmp,var/run,proc,sys,dev,home}
  chmod 1777 "$root/tmp"
  dpkg-deb --fsys-tarfile "$1" | tar -xO ./bin/busybox >"$root/bin/busybox"
  chmod 755 "$root/bin/busybox"
  for lib in $(ldd "$root/bin/busybox" | grep -oE '/[^ ]+'); do
    mkdir -p "$root${lib%/*}" && cp -L "$lib" "$root$lib"
  done
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
  local deb key stamp=$REGISTRY_DIR/critest-images.stamp names name absent=0
  deb=$(busybox_deb)
  key=$(cat "${BASH_SOURCE[0]}" "$CITOOL" "$deb" | sha256sum | cut -c1-16)
  mapfile -t names < <(MODE=list recipe)
  for name in "${names[@]}"; do in_registry "$name" || { absent=1; break; }; done
  if [[ $absent == 0 && -f $stamp && $(<"$stamp") == "$key" ]]; then
    log "critest images (recipe $key) already in the registry at $REGISTRY_ADDR"
    return
  fi
  WORK=$(mktemp -d /tmp/dockpin-critest-images.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  log "building ${#names[@]} substitute images (recipe $key, $(basename "$deb"))"
  make_base "$deb" "$WORK/base"
  recipe
  log "built; pushing"
  printf '%s\n' "${names[@]}" | xargs -P 8 -I{} docker push -q {} >/dev/null
  docker rmi "${names[@]}" >/dev/null
  for name in "${names[@]}"; do in_registry "$name" || die "$name did not reach the registry"; done
  echo "$key" >"$stamp"
  log "pushed ${#names[@]} images to $REGISTRY_ADDR (the digest-pinned test image cannot be made offline)"
}

main "$@"
