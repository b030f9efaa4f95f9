package dockertest_test

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// A held answer is the state when the call was served, even if the engine changes
// before it is released; the engine is not locked while it is held.
func TestReplyHookHoldsTheAnswer(t *testing.T) {
	f := dockertest.New()
	f.AddImage(docker.Image{ID: pauseID, RepoTags: []string{"registry.k8s.io/pause:3.10"}})
	served, release := make(chan struct{}), make(chan struct{})
	f.SetReplyHook("ListImages", func(context.Context) error {
		close(served)
		<-release
		return nil
	})
	type answer struct {
		imgs []docker.Image
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		imgs, err := f.ListImages(context.Background())
		got <- answer{imgs, err}
	}()
	<-served
	assert.NilError(t, f.RemoveImage(context.Background(), pauseID)) // the engine is not locked
	close(release)
	a := <-got
	assert.NilError(t, a.err)
	assert.Equal(t, len(a.imgs), 1, "the answer is the state when the call was served")

	f.SetReplyHook("ListImages", nil)
	imgs, err := f.ListImages(context.Background())
	assert.NilError(t, err)
	assert.Equal(t, len(imgs), 0)
}

// A hook sees the caller's context and its error fails the call; a call that failed
// keeps its own error.
func TestReplyHookFailsCalls(t *testing.T) {
	f := dockertest.New()
	f.SetReplyHook("InspectImage", func(ctx context.Context) error {
		<-ctx.Done() // a hung engine, until the caller gives up
		return ctx.Err()
	})
	f.SetReplyHook("Ping", func(context.Context) error { return errors.New("hook") })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.InspectImage(ctx, "missing:1")
	assert.Check(t, errors.Is(err, context.Canceled), "got %v", err)
	f.AddImage(docker.Image{ID: pauseID})
	_, err = f.InspectImage(ctx, pauseID)
	assert.Check(t, errors.Is(err, context.Canceled), "got %v", err)
	assert.ErrorContains(t, f.Ping(context.Background()), "hook")
	f.SetDown(true)
	assert.Check(t, cerrdefs.IsUnavailable(f.Ping(context.Background())))
}

// A held RemoveImage has already removed the image: other callers find it gone (a
// second removal is NotFound) before the first one's answer returns.
func TestReplyHookHoldsARemoval(t *testing.T) {
	f := dockertest.New()
	f.AddImage(docker.Image{ID: pauseID, RepoTags: []string{"registry.k8s.io/pause:3.10"}})
	served, release := make(chan struct{}), make(chan struct{})
	f.SetReplyHook("RemoveImage", func(context.Context) error {
		select {
		case <-served: // the first removal only
			return nil
		default:
		}
		close(served)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- f.RemoveImage(context.Background(), pauseID) }()
	<-served
	_, err := f.InspectImage(context.Background(), pauseID)
	assert.Check(t, cerrdefs.IsNotFound(err), "got %v", err)
	assert.Check(t, cerrdefs.IsNotFound(f.RemoveImage(context.Background(), pauseID)))
	close(release)
	assert.NilError(t, <-done)
}
