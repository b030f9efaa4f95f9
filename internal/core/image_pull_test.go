package core

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestPullImageReturnsListID(t *testing.T) {
	svc, fake := newTestService(t, nil)
	fake.AddRemote("127.0.0.1:5000/app:1", testImage(7))
	ctx := context.Background()
	resp, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "127.0.0.1:5000/app:1"},
		Auth:  &runtimeapi.AuthConfig{Username: "u", Password: "p"},
	})
	assert.NilError(t, err)
	list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Images), 1)
	assert.Equal(t, resp.ImageRef, list.Images[0].Id)
	pulls := fake.Pulls()
	assert.Equal(t, pulls[0].Auth.Username, "u")
}

// An image removed between the pull and the inspect that names it (kubelet's GC, a
// parallel RemoveImage: critest's parallel image benchmark does this) is pulled again,
// a bounded number of times.
func TestPullImageRetriesAnImageRemovedRightAfterItsPull(t *testing.T) {
	svc, fake := newTestService(t, nil)
	fake.AddRemote("127.0.0.1:5000/app:1", testImage(7))
	fake.InjectError("InspectImage", fmt.Errorf("no such image: %w", cerrdefs.ErrNotFound))
	_, err := svc.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "127.0.0.1:5000/app:1"}})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
	assert.Equal(t, len(fake.Pulls()), pullAttempts)

	fake.InjectError("InspectImage", nil)
	_, err = svc.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "127.0.0.1:5000/app:1"}})
	assert.NilError(t, err)
	assert.Equal(t, len(fake.Pulls()), pullAttempts+1)
}

func TestPullImageErrors(t *testing.T) {
	svc, fake := newTestService(t, nil)
	ctx := context.Background()

	_, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ""}})
	assert.Check(t, cerrdefs.IsInvalidArgument(err))

	_, err = svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nothere:1"}})
	assert.Check(t, cerrdefs.IsNotFound(err), "got %v", err)

	unreachable := &kindErr{kind: cerrdefs.ErrUnavailable, cause: docker.ErrRegistryUnreachable}
	fake.InjectError("PullImage", unreachable)
	_, err = svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "127.0.0.1:1/x:1"}})
	assert.Check(t, strings.HasPrefix(err.Error(), crierrors.ErrRegistryUnavailable.Error()+": "), "got %q", err)
	assert.Check(t, cerrdefs.IsUnavailable(err))

	fake.InjectError("PullImage", nil)
	fake.SetDown(true)
	_, err = svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "x:1"}})
	assert.Check(t, cerrdefs.IsUnavailable(err))
	assert.Check(t, !strings.HasPrefix(err.Error(), crierrors.ErrRegistryUnavailable.Error()), "engine down is not a registry outage: %v", err)
}

// kindErr is an error of one errdefs kind wrapping a cause, as the docker adapter makes them.
type kindErr struct{ kind, cause error }

func (e *kindErr) Error() string   { return fmt.Sprintf("pull: %v", e.cause) }
func (e *kindErr) Unwrap() []error { return []error{e.kind, e.cause} }

// fakeKeeper is a stateful PinKeeper: it remembers which refs were pinned before a
// pull and which pins it put back.
type fakeKeeper struct {
	pinned   map[string]bool
	restored []string
}

func (k *fakeKeeper) KeepPin(_ context.Context, ref string) func(context.Context) {
	if !k.pinned[ref] {
		return func(context.Context) {}
	}
	return func(context.Context) { k.restored = append(k.restored, ref) }
}

func TestPullImageKeepsPin(t *testing.T) {
	svc, fake := newTestService(t, nil)
	keeper := &fakeKeeper{pinned: map[string]bool{"app:1": true}}
	svc.deps.Docker = KeepPins(fake, keeper)
	fake.AddRemote("app:1", testImage(1))
	fake.AddRemote("other:1", testImage(2))
	ctx := context.Background()
	for _, ref := range []string{"app:1", "other:1", "missing:1"} {
		_, _ = svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	}
	assert.DeepEqual(t, keeper.restored, []string{"app:1"})
}

func TestRunPodSandboxKeepsSandboxImagePin(t *testing.T) {
	keeper := &fakeKeeper{pinned: map[string]bool{rtSandboxImage: true}}
	env := newRTEnv(t, rtWithoutSandboxImage(), rtWithPinKeeper(keeper))
	env.engine.AddRemote(rtSandboxImage, testImage(9001))
	env.runSandbox(t, rtSandboxConfig("web"))
	assert.DeepEqual(t, keeper.restored, []string{rtSandboxImage})
}
