#!/bin/sh
# cri-dockerd-dockpin: after the files are removed (dpkg postrm, rpm %postun): systemd forgets the
# removed units; what the scripts recorded in /var/lib/cri-dockerd-dockpin goes (on purge: dpkg
# keeps a removed package's config files, /etc/default/cri-dockerd, until then).
set -e
root=${DPKG_ROOT:-}
state=$root/var/lib/cri-dockerd-dockpin

case "$1" in
  remove) ;;
  purge | 0) # dpkg; rpm: 0 versions left after this erase
    rm -rf "$state"
    ;;
  abort-install) # preinst or the unpack failed: nothing was configured
    rm -f "$state/pending"
    exit 0
    ;;
  *) exit 0 ;;
esac

if [ -z "$root" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload || true
fi
exit 0
