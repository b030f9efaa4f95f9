package sticky

import (
	"context"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestReleaseStore(t *testing.T) {
	ctx := context.Background()
	f := newFakeCtrd()
	target, blobs := f.image(t, nil)
	// Preloaded, pin label set by us (marker); preloaded, pin label the operator's; an
	// operator's pin alone; an image pinning never touched.
	f.put("docker.io/library/ours:1", target, map[string]string{pin.PreloadArchiveLabel: "a.tar", pin.PinnedLabel: pin.PinnedValue, pin.PreloadMarkerLabel: "true", "other": "x"})
	f.put("docker.io/library/theirs:1", target, map[string]string{pin.PreloadArchiveLabel: "a.tar", pin.PinnedLabel: pin.PinnedValue})
	f.put("docker.io/library/operator:1", target, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	f.put("docker.io/library/plain:1", target, nil)
	assert.NilError(t, f.EnsureLease(ctx, DefaultLeaseID))
	for _, d := range blobs {
		assert.NilError(t, f.Lease(ctx, DefaultLeaseID, d))
	}

	out, err := releaseStore(ctx, f, Released{Store: "containerd"}, DefaultLeaseID, logrus.New())
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "containerd", Lease: DefaultLeaseID, LeasedBlobs: len(blobs),
		Relabelled: []string{"docker.io/library/ours:1", "docker.io/library/theirs:1"}})

	r, _ := f.record("docker.io/library/ours:1")
	assert.DeepEqual(t, r.Labels, map[string]string{"other": "x"})
	r, _ = f.record("docker.io/library/theirs:1")
	assert.DeepEqual(t, r.Labels, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	r, _ = f.record("docker.io/library/operator:1")
	assert.DeepEqual(t, r.Labels, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	assert.Check(t, is.Len(f.leased(), 0))
	_, held := f.leases[DefaultLeaseID]
	assert.Check(t, !held, "the lease itself is deleted")

	// Again: nothing left to release, and no error.
	out, err = releaseStore(ctx, f, Released{Store: "containerd"}, DefaultLeaseID, logrus.New())
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "containerd", Lease: DefaultLeaseID})
}

// TestReleaseStoreOnlyOwn: an instance's release leaves another instance's lease and
// the preload labels it owns.
func TestReleaseStoreOnlyOwn(t *testing.T) {
	ctx := context.Background()
	f := newFakeCtrd()
	target, blobs := f.image(t, nil)
	const other = DefaultLeaseID + ".0123456789ab"
	f.put("docker.io/library/mine:1", target, map[string]string{pin.PreloadArchiveLabel: "a.tar", pin.PreloadOwnerLabel: DefaultLeaseID})
	theirs := map[string]string{pin.PreloadArchiveLabel: "b.tar", pin.PreloadOwnerLabel: other, pin.PinnedLabel: pin.PinnedValue, pin.PreloadMarkerLabel: "true"}
	f.put("docker.io/library/theirs:1", target, theirs)
	for _, l := range []string{DefaultLeaseID, other} {
		assert.NilError(t, f.EnsureLease(ctx, l))
		assert.NilError(t, f.Lease(ctx, l, blobs[0]))
	}
	out, err := releaseStore(ctx, f, Released{Store: "containerd"}, DefaultLeaseID, logrus.New())
	assert.NilError(t, err)
	assert.DeepEqual(t, out.Relabelled, []string{"docker.io/library/mine:1"})
	r, _ := f.record("docker.io/library/theirs:1")
	assert.DeepEqual(t, r.Labels, theirs)
	_, held := f.leases[other]
	assert.Check(t, held, "the other instance's lease stays")
	_, held = f.leases[DefaultLeaseID]
	assert.Check(t, !held)
}
