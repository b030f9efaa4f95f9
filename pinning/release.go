package pinning

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
	"github.com/sirupsen/logrus"
)

// Release gives back what pinning holds in the engine, for an uninstall or a move to
// a cri-dockerd without pinning (`cri-dockerd pins release`): on containerd's image
// store, the labels pinning set on image records (PreloadArchiveLabel, and the pin
// label where PreloadMarkerLabel says pinning set it; pin labels set by anyone else
// stay) and the lease StickyLeaseID, whose content becomes collectable again (`docker
// rmi`, `docker image prune` and kubelet's image GC free it). The classic image store
// holds nothing. Run it while no cri-dockerd with pinning serves on this engine: a
// running one leases and labels again. An error names each part that failed; what
// succeeded is in the result.
func Release(ctx context.Context, f Flags, h Host, engine Engine, log logrus.FieldLogger) (Released, error) {
	log = logctx.OrDiscard(log)
	info, err := engine.EngineInfo(ctx)
	if err != nil {
		return Released{}, fmt.Errorf("engine info: %w", err)
	}
	if !info.ContainerdStore {
		return Released{Store: "classic"}, nil
	}
	out := Released{Store: "containerd"}
	if f.ContainerdAddress == "" && h.DockerEndpoint != "" && !strings.HasPrefix(h.DockerEndpoint, "unix://") {
		return out, fmt.Errorf("the engine %s is remote: set --containerd-address to its containerd socket", h.DockerEndpoint)
	}
	addr := containerdAddress(f.ContainerdAddress, info.ContainerdAddress)
	if addr == "" {
		return out, errors.New("no containerd socket found: set --containerd-address")
	}
	src, err := containerd.NewSource(containerd.Config{
		Address: addr, Namespace: firstNonEmpty(f.ContainerdNamespace, info.ContainerdNamespace, "moby"),
		Timeout: f.ContainerdTimeout, WarnInterval: pinner.DefaultConfig().WarnInterval,
	}, log)
	if err != nil {
		return out, err
	}
	defer func() { _ = src.Close() }()
	return sticky.Release(ctx, src.Store(), log)
}
