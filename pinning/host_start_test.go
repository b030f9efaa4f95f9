package pinning

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
)

func TestStartPreloadsAndPins(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "infra.tar"), []byte("archive-infra"), 0o644))
	engine := newFakeEngine()
	engine.archives["archive-infra"] = []string{"registry.local/infra/dns:1"}
	f := DefaultFlags()
	f.PreloadImagesDir = dir
	f.PinnedImages = []string{"busybox:1.36"}
	root := t.TempDir()
	s, err := Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage, RootDirectory: root, DockerEndpoint: "unix:///var/run/docker.sock"}, engine, logctx.Discard())
	assert.NilError(t, err)
	defer s.Close()

	// The socket is served first: the archive is loaded in the background once it
	// stayed unchanged for the settle time.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if len(engine.loadedArchives()) == 0 {
			return poll.Continue("not loaded yet")
		}
		return poll.Success()
	})
	assert.DeepEqual(t, engine.loadedArchives(), []string{"archive-infra"})
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if rs := s.PreloadRecords(); len(rs) != 1 || rs[0].State != pinner.PreloadLoaded {
			return poll.Continue("not recorded yet: %+v", rs)
		}
		return poll.Success()
	})
	reasons, err := s.Evaluate(context.Background(), []pin.Image{
		{ID: pintest.DigA, RepoTags: []string{"registry.local/infra/dns:1"}},
		{ID: pintest.DigB, RepoTags: []string{"busybox:1.36"}},
		{ID: pintest.DigC, RepoTags: []string{"busybox:1.37"}},
	})
	assert.NilError(t, err)
	assert.DeepEqual(t, reasons[0], []pin.Reason{{Source: pin.SourcePreload, Detail: "infra.tar: registry.local/infra/dns:1"}})
	assert.DeepEqual(t, reasons[1], []pin.Reason{{Source: pin.SourcePattern, Detail: "busybox:1.36"}})
	assert.Check(t, is.Len(reasons[2], 0))
	// The classic store: the containerd source is off, and no pin is kept across pulls.
	assert.Check(t, s.PinKeeper() == nil)
	s.KeepPin(context.Background(), "busybox:1.36")(context.Background())
	_, err = os.Stat(filepath.Join(root, StateDirName, pinner.PreloadStateName+".json"))
	assert.NilError(t, err, "what the archives pin is saved under the root directory")
}

func TestStartEngineInfoFails(t *testing.T) {
	engine := newFakeEngine()
	engine.infoErr = errors.New("engine down")
	_, err := Start(context.Background(), DefaultFlags(), Host{SandboxImage: DefaultSandboxImage}, engine, nil)
	assert.Check(t, is.ErrorContains(err, "engine down"))

	f := DefaultFlags()
	f.PinFromContainerdLabels = "false" // then the engine's answer is not needed
	s, err := Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage}, engine, nil)
	assert.NilError(t, err)
	assert.NilError(t, s.Close())
}

func TestStartRefusesBadFlags(t *testing.T) {
	f := DefaultFlags()
	f.PinnedImages = []string{"bad*pattern*here"}
	f.PinFromContainerdLabels = "false"
	assert.Check(t, f.Validate(DefaultSandboxImage) != nil)
	_, err := Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage}, nil, nil)
	assert.Check(t, err != nil)

	f = DefaultFlags()
	f.PinFromContainerdLabels = "sometimes"
	f.ContainerdTimeout = 0
	err = f.Validate(DefaultSandboxImage)
	assert.Check(t, is.ErrorContains(err, "--pin-from-containerd-labels"))
	assert.Check(t, is.ErrorContains(err, "--containerd-timeout"))
}

func TestReloadOnSIGHUP(t *testing.T) {
	pins := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(pins, []byte("# none yet\n"), 0o644))
	f := DefaultFlags()
	f.PinFromContainerdLabels = "false"
	f.PinnedImagesFile = pins
	s, err := Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage}, nil, nil)
	assert.NilError(t, err)
	stop := s.ReloadOnSIGHUP()
	defer stop()
	img := pin.Image{ID: pintest.DigA, RepoTags: []string{"busybox:1.36"}}
	assert.Check(t, is.Len(s.Check(context.Background(), img), 0))

	assert.NilError(t, os.WriteFile(pins, []byte("busybox\n"), 0o644))
	assert.NilError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if len(s.Check(context.Background(), img)) == 0 {
			return poll.Continue("not reloaded yet")
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(10*time.Millisecond))
}

// watchingEngine is a fake engine on the classic store that also lists its images
// and streams removals (ImageWatcher).
type watchingEngine struct {
	*fakeEngine
	images []pin.Image
}

func (e watchingEngine) Images(context.Context) ([]pin.Image, error) { return e.images, nil }

func (e watchingEngine) WatchImageRemovals(ctx context.Context, _ func(time.Time)) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestStartStickyOnClassicStore(t *testing.T) {
	engine := watchingEngine{fakeEngine: newFakeEngine(), images: []pin.Image{{ID: pintest.DigA, RepoTags: []string{"busybox:1.36"}}}}
	f := DefaultFlags()
	f.PinnedImages = []string{"busybox:1.36"}
	s, err := Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage, RootDirectory: t.TempDir()}, engine, logctx.Discard())
	assert.NilError(t, err)
	assert.Check(t, s.RefusesPinnedRemoval())
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		st := s.Info()["sticky"].(map[string]any)["state"].(sticky.ClassicStatus)
		if st.PinnedImages != 1 {
			return poll.Continue("pinned images known: %d", st.PinnedImages)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(10*time.Millisecond))
	assert.NilError(t, s.Close()) // stops the keeper and its event watch

	f.RestorePinnedImages = false
	s, err = Start(context.Background(), f, Host{SandboxImage: DefaultSandboxImage}, newFakeEngine(), logctx.Discard())
	assert.NilError(t, err)
	defer s.Close()
	assert.Check(t, !s.RefusesPinnedRemoval())
	assert.Check(t, is.Contains(s.Info()["sticky"].(map[string]any)["lease"], "off"))
}
