#!/bin/sh
# cri-dockerd-dockpin: after the files are in place (dpkg postinst; rpm %post and %posttrans).
#
# Install (a first install, one after a removal or purge, one that replaces upstream's cri-dockerd):
# enable cri-docker.socket and cri-docker.service and, where systemd runs, start them, as
# upstream's .deb does. Upgrade or reinstall of an installed package: restart the service if it
# runs, and leave the units enabled or disabled, running or stopped, as they were.
# dpkg: preinst.sh records an install in /var/lib/cri-dockerd-dockpin/pending (dpkg's $2 is the
# last configured version after a `dpkg -r` too). rpm: %post gets 1 (install) or 2 (upgrade).
#
# A unit the operator masked stays masked: neither unit is then enabled or started. The only mask
# undone is one deb-systemd-helper made and recorded itself (older debhelper packages mask their
# units on removal: upstream's, replaced by this package), through deb-systemd-helper.
#
# rpm erases a package that this one replaces in the same transaction (dnf --allowerasing) after
# our %post, and upstream's %preun disables and stops the units we share names with; so %post
# only records what to do and %posttrans, run after every other scriptlet of the transaction,
# does it.
#
# No running systemd (an image build, a chroot, a container): the units are enabled, not started.
# DPKG_ROOT (dpkg --root with --force-script-chrootless): that tree is not the running system:
# the units are enabled in it (systemctl --root), nothing is started.
set -e
root=${DPKG_ROOT:-}
state=$root/var/lib/cri-dockerd-dockpin

case "$1" in
  configure) # dpkg: $2 is the version configured before, empty on a first install
    action=upgrade
    if [ -z "$2" ] || [ "$(cat "$state/pending" 2>/dev/null)" = install ]; then action=install; fi
    ;;
  abort-remove) # prerm `remove` had stopped and disabled the units, then the removal failed
    action=install
    ;;
  [0-9]*) # rpm: %post gets 1 (install) or 2 (upgrade); %posttrans finds what %post recorded
    if [ -f "$state/pending" ]; then
      action=$(cat "$state/pending")
    else
      mkdir -p "$state"
      if [ "$1" = 1 ]; then echo install; else echo upgrade; fi >"$state/pending"
      exit 0
    fi
    ;;
  *) exit 0 ;;
esac
rm -f "$state/pending"
command -v systemctl >/dev/null 2>&1 || exit 0

running=false
if [ -z "$root" ] && [ -d /run/systemd/system ]; then running=true; fi
# sd ARGS — systemctl on the tree being installed.
sd() {
  if [ -n "$root" ]; then systemctl --root="$root" "$@"; else systemctl "$@"; fi
}

if $running; then systemctl daemon-reload || true; fi
if [ "$action" != install ]; then
  if $running; then systemctl try-restart cri-docker.service || true; fi
  exit 0
fi

if command -v deb-systemd-helper >/dev/null 2>&1; then
  deb-systemd-helper unmask cri-docker.socket cri-docker.service >/dev/null || true
fi
for unit in cri-docker.socket cri-docker.service; do
  case $(sd is-enabled "$unit" 2>/dev/null || true) in
    masked*)
      echo "cri-dockerd-dockpin: $unit is masked: cri-docker.socket and cri-docker.service are left" \
        "as they are (to use them: systemctl unmask $unit; systemctl enable --now cri-docker.socket cri-docker.service)" >&2
      exit 0
      ;;
  esac
done
sd enable cri-docker.socket cri-docker.service || true
if $running; then
  systemctl start cri-docker.socket || true
  systemctl restart cri-docker.service || true
fi
exit 0
