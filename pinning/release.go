package pinning

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Released is what Release gave back.
type Released struct {
	// Store is the engine's image store: "containerd" or "classic".
	Store string `json:"store"`
	// Lease is the lease deleted ("" when there was none to delete, on the classic store).
	Lease string `json:"lease,omitempty"`
	// LeasedBlobs is how many content blobs the lease held.
	LeasedBlobs int `json:"leasedBlobs"`
	// Relabelled are the image records whose pinning labels were removed.
	Relabelled []string `json:"relabelled"`
}

// Release gives back what pinning holds in the engine, for an uninstall or a move to
// a cri-dockerd without pinning (`cri-dockerd pins release`): on containerd's image
// store, the labels pinning set on image records (PreloadArchiveLabel, and the pin
// label where preloadMarkerLabel says pinning set it; pin labels set by anyone else
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
	src, err := NewContainerdSource(ContainerdConfig{
		Address: addr, Namespace: firstNonEmpty(f.ContainerdNamespace, info.ContainerdNamespace, "moby"),
		Timeout: f.ContainerdTimeout, WarnInterval: DefaultConfig().WarnInterval,
	}, log)
	if err != nil {
		return out, err
	}
	defer func() { _ = src.Close() }()
	return releaseStore(ctx, src.store(), out, log)
}

// releaseStore removes pinning's labels from every record of st, then deletes the lease.
func releaseStore(ctx context.Context, st ctrdStore, out Released, log logrus.FieldLogger) (Released, error) {
	var errs []error
	recs, err := st.Records(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list image records: %w", err))
	}
	for _, r := range recs {
		del := ourLabels(r.Labels)
		if len(del) == 0 {
			continue
		}
		if err := st.SetLabels(ctx, r.Name, r.Target, nil, del); err != nil {
			errs = append(errs, fmt.Errorf("remove the pinning labels of %s: %w", r.Name, err))
			continue
		}
		out.Relabelled = append(out.Relabelled, r.Name)
		log.WithField("record", r.Name).WithField("labels", del).Info("pins release: labels removed")
	}
	held, err := st.LeasedContent(ctx, StickyLeaseID)
	if err != nil {
		errs = append(errs, err)
	} else if err := st.DeleteLease(ctx, StickyLeaseID); err != nil {
		errs = append(errs, err)
	} else {
		out.Lease, out.LeasedBlobs = StickyLeaseID, len(held)
		log.WithField("lease", StickyLeaseID).WithField("blobs", len(held)).Info("pins release: lease deleted")
	}
	return out, errors.Join(errs...)
}

// ourLabels are the labels of a record that pinning set: the preload archive's name,
// and the pin label with its marker where the marker says pinning added it.
func ourLabels(labels map[string]string) []string {
	var del []string
	if _, ok := labels[PreloadArchiveLabel]; ok {
		del = append(del, PreloadArchiveLabel)
	}
	if isPreloadMirror(labels) {
		del = append(del, preloadMarkerLabel)
		if labels[PinnedLabel] == PinnedValue {
			del = append(del, PinnedLabel)
		}
	}
	return del
}
