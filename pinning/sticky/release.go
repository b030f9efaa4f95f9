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

// Release gives back what the instance owning lease holds in the engine's
// containerd: the labels it set on image records (PreloadArchiveLabel and
// PreloadOwnerLabel, and the pin label where PreloadMarkerLabel says it set it; pin
// labels set by anyone else, and another instance's, stay) and the lease, whose
// content becomes collectable again. An error names each part that failed; what
// succeeded is in the result.
func Release(ctx context.Context, st containerd.Store, lease string, log logrus.FieldLogger) (Released, error) {
	return releaseStore(ctx, st, Released{Store: "containerd"}, lease, log)
}

// releaseStore removes lease's labels from every record of st, then deletes the lease.
func releaseStore(ctx context.Context, st containerd.Store, out Released, lease string, log logrus.FieldLogger) (Released, error) {
	var errs []error
	recs, err := st.Records(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list image records: %w", err))
	}
	for _, r := range recs {
		del := ownedLabels(r.Labels, lease)
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
	held, err := st.LeasedContent(ctx, lease)
	if err != nil {
		errs = append(errs, err)
	} else if err := st.DeleteLease(ctx, lease); err != nil {
		errs = append(errs, err)
	} else {
		out.Lease, out.LeasedBlobs = lease, len(held)
		log.WithField("lease", lease).WithField("blobs", len(held)).Info("pins release: lease deleted")
	}
	return out, errors.Join(errs...)
}

// ownedLabels are the labels of a record that the instance owning lease set: the
// preload archive's name and owner, and the pin label with its marker where the
// marker says it added it. Labels another instance owns are not.
func ownedLabels(labels map[string]string, lease string) []string {
	if o := labels[pin.PreloadOwnerLabel]; o != "" && o != lease {
		return nil
	}
	var del []string
	for _, l := range []string{pin.PreloadArchiveLabel, pin.PreloadOwnerLabel} {
		if _, ok := labels[l]; ok {
			del = append(del, l)
		}
	}
	if pin.IsPreloadMirror(labels) {
		del = append(del, pin.PreloadMarkerLabel)
		if labels[pin.PinnedLabel] == pin.PinnedValue {
			del = append(del, pin.PinnedLabel)
		}
	}
	return del
}
