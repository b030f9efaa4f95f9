package sticky

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/pin"
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

// Release gives back what pinning holds in the engine's containerd: the labels pinning
// set on image records (PreloadArchiveLabel, and the pin label where
// PreloadMarkerLabel says pinning set it; pin labels set by anyone else stay) and the
// lease LeaseID, whose content becomes collectable again. An error names each
// part that failed; what succeeded is in the result.
func Release(ctx context.Context, st containerd.Store, log logrus.FieldLogger) (Released, error) {
	return releaseStore(ctx, st, Released{Store: "containerd"}, log)
}

// releaseStore removes pinning's labels from every record of st, then deletes the lease.
func releaseStore(ctx context.Context, st containerd.Store, out Released, log logrus.FieldLogger) (Released, error) {
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
	held, err := st.LeasedContent(ctx, LeaseID)
	if err != nil {
		errs = append(errs, err)
	} else if err := st.DeleteLease(ctx, LeaseID); err != nil {
		errs = append(errs, err)
	} else {
		out.Lease, out.LeasedBlobs = LeaseID, len(held)
		log.WithField("lease", LeaseID).WithField("blobs", len(held)).Info("pins release: lease deleted")
	}
	return out, errors.Join(errs...)
}

// ourLabels are the labels of a record that pinning set: the preload archive's name,
// and the pin label with its marker where the marker says pinning added it.
func ourLabels(labels map[string]string) []string {
	var del []string
	if _, ok := labels[pin.PreloadArchiveLabel]; ok {
		del = append(del, pin.PreloadArchiveLabel)
	}
	if pin.IsPreloadMirror(labels) {
		del = append(del, pin.PreloadMarkerLabel)
		if labels[pin.PinnedLabel] == pin.PinnedValue {
			del = append(del, pin.PinnedLabel)
		}
	}
	return del
}
