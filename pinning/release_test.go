package pinning

import (
	"context"
	"errors"
	"testing"

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
	f.put("docker.io/library/ours:1", target, map[string]string{PreloadArchiveLabel: "a.tar", PinnedLabel: PinnedValue, preloadMarkerLabel: "true", "other": "x"})
	f.put("docker.io/library/theirs:1", target, map[string]string{PreloadArchiveLabel: "a.tar", PinnedLabel: PinnedValue})
	f.put("docker.io/library/operator:1", target, map[string]string{PinnedLabel: PinnedValue})
	f.put("docker.io/library/plain:1", target, nil)
	assert.NilError(t, f.EnsureLease(ctx, StickyLeaseID))
	for _, d := range blobs {
		assert.NilError(t, f.Lease(ctx, StickyLeaseID, d))
	}

	out, err := releaseStore(ctx, f, Released{Store: "containerd"}, logrus.New())
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "containerd", Lease: StickyLeaseID, LeasedBlobs: len(blobs),
		Relabelled: []string{"docker.io/library/ours:1", "docker.io/library/theirs:1"}})

	r, _ := f.record("docker.io/library/ours:1")
	assert.DeepEqual(t, r.Labels, map[string]string{"other": "x"})
	r, _ = f.record("docker.io/library/theirs:1")
	assert.DeepEqual(t, r.Labels, map[string]string{PinnedLabel: PinnedValue})
	r, _ = f.record("docker.io/library/operator:1")
	assert.DeepEqual(t, r.Labels, map[string]string{PinnedLabel: PinnedValue})
	assert.Check(t, is.Len(f.leased(), 0))
	_, held := f.leases[StickyLeaseID]
	assert.Check(t, !held, "the lease itself is deleted")

	// Again: nothing left to release, and no error.
	out, err = releaseStore(ctx, f, Released{Store: "containerd"}, logrus.New())
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "containerd", Lease: StickyLeaseID})
}

func TestReleaseClassicHoldsNothing(t *testing.T) {
	out, err := Release(context.Background(), DefaultFlags(), Host{}, &fakeEngine{info: EngineInfo{Driver: "overlay2"}}, nil)
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "classic"})
}

func TestReleaseEngineDown(t *testing.T) {
	_, err := Release(context.Background(), DefaultFlags(), Host{}, &fakeEngine{infoErr: errors.New("connection refused")}, nil)
	assert.ErrorContains(t, err, "engine info: connection refused")
}

func TestReleaseRemoteEngineNeedsAnAddress(t *testing.T) {
	_, err := Release(context.Background(), DefaultFlags(), Host{DockerEndpoint: "tcp://10.0.0.1:2376"},
		&fakeEngine{info: EngineInfo{ContainerdStore: true}}, nil)
	assert.ErrorContains(t, err, "--containerd-address")
}
