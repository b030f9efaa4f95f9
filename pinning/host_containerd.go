package pinning

import (
	"context"
	"os"
	"strings"

	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/sirupsen/logrus"
)

// ContainerdSnapshotterDriverType is the "driver-type" the engine's /info reports in
// DriverStatus when images live in containerd's image store.
const ContainerdSnapshotterDriverType = "io.containerd.snapshotter.v1"

// UsesContainerdStore tells from the DriverStatus pairs of the engine's /info
// whether it uses containerd's image store (a host fills EngineInfo.ContainerdStore
// with it).
func UsesContainerdStore(driverStatus [][2]string) bool {
	for _, kv := range driverStatus {
		if kv[0] == "driver-type" && kv[1] == ContainerdSnapshotterDriverType {
			return true
		}
	}
	return false
}

// wellKnownContainerdSockets are tried, in order, when neither the flag nor /info names one.
var wellKnownContainerdSockets = []string{"/run/containerd/containerd.sock", "/var/run/docker/containerd/containerd.sock"}

// containerdPins decides whether the containerd record-label source runs: with "auto",
// whenever the engine uses the containerd image store, answering or not. It returns
// the source to register (a Disabled one saying why when it is off) and, when on, the
// containerd.Source itself (for keeping pins across pulls). dockerEndpoint is the
// engine's API endpoint: a remote engine's containerd socket is not on this machine.
func containerdPins(ctx context.Context, f *Flags, dockerEndpoint string, info EngineInfo, log logrus.FieldLogger) (pin.Source, *containerd.Source) {
	off := func(reason string) (pin.Source, *containerd.Source) {
		return pin.Disabled(pin.SourceContainerd, reason), nil
	}
	mode := f.PinFromContainerdLabels
	if mode == "false" {
		return off("turned off by --pin-from-containerd-labels=false")
	}
	if mode == "auto" && !info.ContainerdStore {
		return off("the engine uses the classic image store (driver " + info.Driver + "), not containerd's")
	}
	if f.ContainerdAddress == "" && !strings.HasPrefix(dockerEndpoint, "unix://") {
		log.Warn("containerd pin source off: the engine is remote, so its containerd socket is not on this machine; set --containerd-address to use it")
		return off("remote engine " + dockerEndpoint + " and no --containerd-address")
	}
	addr := containerdAddress(f.ContainerdAddress, info.ContainerdAddress)
	ns := firstNonEmpty(f.ContainerdNamespace, info.ContainerdNamespace, "moby")
	if addr == "" {
		log.Warn("containerd pin source off: no containerd socket found; set --containerd-address")
		return off("no containerd socket found")
	}
	src, err := containerd.NewSource(containerd.Config{
		Address: addr, Namespace: ns, IncludeDangling: f.PinDanglingRecords,
		Timeout: f.ContainerdTimeout, WarnInterval: pinner.DefaultConfig().WarnInterval,
	}, log.WithField("source", pin.SourceContainerd))
	if err != nil {
		log.WithError(err).Warn("containerd pin source off")
		return off(err.Error())
	}
	if _, err := src.Snapshot(ctx); err != nil {
		// Not a reason to turn the source off: containerd may be restarting, or slow on
		// a node booting under load. Its saved state answers meanwhile (or, on a node
		// where it never answered, ListImages waits for it); the client reconnects.
		log.WithError(err).Warn("containerd pin source on, but containerd does not answer yet; " +
			"answering from its last saved pins until it does")
	}
	if mode == "true" && !info.ContainerdStore {
		log.Warn("containerd pin source forced on, but the engine reports the classic image store: no records will match")
	}
	log.WithField("address", addr).WithField("namespace", ns).Info("containerd pin source on")
	return src, src
}

// containerdAddress picks the socket: the flag, then the engine's /info, then the first
// well-known socket that exists.
func containerdAddress(flag, fromInfo string) string {
	if a := firstNonEmpty(flag, fromInfo); a != "" {
		return a
	}
	for _, p := range wellKnownContainerdSockets {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
