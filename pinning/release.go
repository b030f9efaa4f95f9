package pinning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
	"github.com/sirupsen/logrus"
)

// Release gives back what the pinning of the instance with root directory
// h.RootDirectory holds in the engine, for an uninstall or a move to a cri-dockerd
// without pinning (`cri-dockerd pins release`): on containerd's image store, the
// labels it set on image records (PreloadArchiveLabel and PreloadOwnerLabel, and the
// pin label where PreloadMarkerLabel says it set it; pin labels set by anyone else,
// and another instance's labels, stay) and its lease (LeaseFor), whose content
// becomes collectable again (`docker rmi`, `docker image prune` and kubelet's image GC
// free it). The classic image store holds nothing. Run it while that instance does not
// serve: a running one leases and labels again. An error names each part that failed;
// what succeeded is in the result.
func Release(ctx context.Context, f Flags, h Host, engine Engine, log logrus.FieldLogger) (Released, error) {
	log = logctx.OrDiscard(log)
	info, err := engine.EngineInfo(ctx)
	if err != nil {
		return Released{}, fmt.Errorf("engine info: %w", err)
	}
	return release(ctx, f, h, info, log)
}

// release is Release on an engine whose /info is info.
func release(ctx context.Context, f Flags, h Host, info EngineInfo, log logrus.FieldLogger) (Released, error) {
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
	return sticky.Release(ctx, src.Store(), LeaseFor(h.RootDirectory), log)
}

// releaseWhenOff gives back, in the background, what an earlier start with the lease
// on left in the engine, when this start keeps no lease (the containerd source turned
// off on containerd's image store): a lease nobody keeps in step would hold its
// content forever. Nothing there is a no-op.
func releaseWhenOff(f Flags, h Host, info EngineInfo, log logrus.FieldLogger) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := release(ctx, f, h, info, log)
		entry := log.WithField("lease", out.Lease).WithField("blobs", out.LeasedBlobs).WithField("relabelled", len(out.Relabelled))
		switch {
		case err != nil:
			entry.WithError(err).Warn("sticky pins off: cannot give back what an earlier start held; run `cri-dockerd pins release`")
		case out.Lease != "" && (out.LeasedBlobs > 0 || len(out.Relabelled) > 0):
			entry.Info("sticky pins off: the lease and labels of an earlier start given back")
		}
	}()
}
