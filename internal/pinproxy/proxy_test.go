package pinproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestUnaryPassthrough(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	v, err := h.rt.Version(ctx, &runtimeapi.VersionRequest{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(v.RuntimeName, "fake"))

	cs, err := h.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	assert.NilError(t, err)
	assert.Check(t, is.Len(cs.Containers, 2))

	// The streaming URL comes back untouched.
	ex, err := h.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"true"}})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(ex.Url, "http://127.0.0.1:1234/exec/c1"))

	// The backend's error status passes through, code and message.
	_, err = h.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "p1"})
	assert.Check(t, is.Equal(status.Code(err), codes.NotFound))
	assert.Check(t, is.Equal(status.Convert(err).Message(), "pod p1 not found"))

	// An RPC the backend does not implement stays Unimplemented.
	_, err = h.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: "c1"})
	assert.Check(t, is.Equal(status.Code(err), codes.Unimplemented))
}

func TestServerStreamingPassthrough(t *testing.T) {
	h := newHarness(t)
	stream, err := h.rt.GetContainerEvents(context.Background(), &runtimeapi.GetEventsRequest{})
	assert.NilError(t, err)
	var got []string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		assert.NilError(t, err)
		got = append(got, ev.ContainerId)
	}
	assert.Check(t, is.DeepEqual(got, []string{"e1", "e2", "e3"}))
}

// An RPC of a service this build has never heard of reaches the backend unchanged.
func TestUnknownMethodPassthrough(t *testing.T) {
	h := newHarness(t)
	var out wrapperspb.StringValue
	err := h.conn.Invoke(context.Background(), "/dockpin.test.Echo/Say", wrapperspb.String("hello"), &out)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(out.Value, "HELLO"))

	err = h.conn.Invoke(context.Background(), "/dockpin.test.Echo/Nothing", wrapperspb.String("x"), &out)
	assert.Check(t, is.Equal(status.Code(err), codes.Unimplemented))
}

func TestListImagesPinnedIsBackendOrOurs(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		filter string
		want   map[string]bool
	}{
		{filter: "", want: map[string]bool{idPlain: false, idPattern: true, idLabel: true, idBackend: true}},
		{filter: "example.com/app:1", want: map[string]bool{idPattern: true}},
		{filter: "example.com/plain:1", want: map[string]bool{idPlain: false}},
	}
	for _, tc := range tests {
		t.Run(tc.filter, func(t *testing.T) {
			resp, err := h.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{
				Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: tc.filter}},
			})
			assert.NilError(t, err)
			got := map[string]bool{}
			for _, img := range resp.Images {
				got[img.Id] = img.Pinned
				assert.Check(t, img.Size > 0, "the backend's other fields pass through")
			}
			assert.Check(t, is.DeepEqual(got, tc.want))
		})
	}
}

// streamImages collects a StreamImages through the proxy: pinned by image ID, and the
// number of messages.
func streamImages(t *testing.T, h *harness) (map[string]bool, int, error) {
	t.Helper()
	stream, err := h.img.StreamImages(context.Background(), &runtimeapi.StreamImagesRequest{})
	assert.NilError(t, err)
	got, msgs := map[string]bool{}, 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return got, msgs, nil
		}
		if err != nil {
			return got, msgs, err
		}
		msgs++
		for _, img := range m.Images {
			got[img.Id] = img.Pinned
		}
	}
}

// StreamImages (KEP-5825) through the proxy pins as ListImages does, chunk by chunk;
// when a pin cannot be decided the stream fails rather than show an image unpinned.
func TestStreamImagesPinnedIsBackendOrOurs(t *testing.T) {
	got, msgs, err := streamImages(t, newHarness(t))
	assert.NilError(t, err)
	assert.Check(t, is.DeepEqual(got, map[string]bool{idPlain: false, idPattern: true, idLabel: true, idBackend: true}))
	assert.Check(t, is.Equal(msgs, 4), "the backend's chunks pass through as they are")

	_, _, err = streamImages(t, newHarness(t, failingSource{}))
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)
	assert.Check(t, is.ErrorContains(err, "stream images"))

	_, _, err = streamImages(t, newHarnessWithEngine(t, &fakeEngine{err: cerrdefs.ErrUnavailable}))
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)
}

func TestImageStatusPinnedIsBackendOrOurs(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		image   string
		want    bool
		reasons bool // our reasons in the verbose info
	}{
		{image: "example.com/plain:1", want: false},
		{image: "example.com/app:1", want: true, reasons: true},
		{image: "example.com/labelled:1", want: true, reasons: true},
		{image: "example.com/backend:1", want: true},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			resp, err := h.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{
				Image: &runtimeapi.ImageSpec{Image: tc.image}, Verbose: true,
			})
			assert.NilError(t, err)
			assert.Check(t, is.Equal(resp.Image.Pinned, tc.want))
			assert.Check(t, is.Equal(resp.Info["backend"], "yes"))
			ours, has := resp.Info["pinProxy"]
			assert.Check(t, is.Equal(has, tc.reasons))
			if tc.reasons {
				var info struct {
					PinReasons []pin.Reason `json:"pinReasons"`
				}
				assert.Check(t, json.Unmarshal([]byte(ours), &info), ours)
				assert.Check(t, len(info.PinReasons) > 0 && info.PinReasons[0].Source != "", ours)
			}
		})
	}
	// A missing image stays the CRI's empty answer.
	resp, err := h.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nope:1"}})
	assert.NilError(t, err)
	assert.Check(t, resp.Image == nil)
}

// A pin source without usable state: ListImages refuses (Unavailable) rather than
// show pinned images unpinned; ImageStatus goes on (the backend's own pin and ours
// that still answer).
func TestPinSourceWithoutStateFailsListImages(t *testing.T) {
	h := newHarness(t, failingSource{})
	_, err := h.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)
	assert.Check(t, is.ErrorContains(err, "broken"))

	resp, err := h.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/app:1"}})
	assert.NilError(t, err)
	assert.Check(t, resp.Image.Pinned)
}

// The engine cannot give labels: ListImages is Unavailable (a label pin may be missing);
// ImageStatus decides without them.
// An image the engine's label index does not hold yet (pulled a moment ago) is asked
// for alone: its config-label pin is not dropped. When the engine cannot say, the
// list is refused rather than show it unpinned.
func TestListImagesAsksForUnindexedLabels(t *testing.T) {
	engine := &fakeEngine{labels: map[string]map[string]string{
		idPlain: {"a": "b"},
		idLabel: {pin.PinnedLabel: pin.PinnedValue},
	}, unindexed: map[string]bool{idLabel: true}}
	h := newHarnessWithEngine(t, engine)
	resp, err := h.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	for _, img := range resp.Images {
		if img.Id == idLabel {
			assert.Check(t, img.Pinned, "pinned by its config label")
		}
	}
	assert.Check(t, engine.calls >= 1)

	engine.oneErr = cerrdefs.ErrUnavailable
	_, err = h.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)
}

func TestEngineDownFailsListImages(t *testing.T) {
	h := newHarnessWithEngine(t, &fakeEngine{err: cerrdefs.ErrUnavailable})
	_, err := h.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)
	resp, err := h.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/app:1"}})
	assert.NilError(t, err)
	assert.Check(t, resp.Image.Pinned)
}

// crictl info through the proxy: the backend's Status, with our pinning state added.
func TestStatusAddsPinningInfo(t *testing.T) {
	h := newHarness(t)
	resp, err := h.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	assert.Check(t, resp.Status.Conditions[0].Status)
	assert.Check(t, is.Equal(resp.Info["config"], `{"backend":true}`))
	var pinningInfo struct {
		SandboxImage string   `json:"sandboxImage"`
		Patterns     []string `json:"patterns"`
	}
	assert.NilError(t, json.Unmarshal([]byte(resp.Info["pinning"]), &pinningInfo))
	assert.Check(t, is.Equal(pinningInfo.SandboxImage, "example.com/pause:3"))
	assert.Check(t, is.DeepEqual(pinningInfo.Patterns, []string{"example.com/app"}))
	assert.Check(t, is.Equal(resp.Info["pinProxy"], `{"backend":"passthrough:///backend"}`))

	resp, err = h.rt.Status(context.Background(), &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	assert.Check(t, is.Len(resp.Info, 0))
}

// The backend goes away: Unavailable; it comes back: the proxy reconnects by itself.
func TestBackendRestart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)

	h.backend.stop()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		_, err := h.rt.Version(ctx, &runtimeapi.VersionRequest{})
		if status.Code(err) == codes.Unavailable {
			return poll.Success()
		}
		return poll.Continue("Version: %v", err)
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(20*time.Millisecond))
	_, err = h.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.Check(t, is.Equal(status.Code(err), codes.Unavailable), "%v", err)

	h.backend.start(t)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := h.img.ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
			return poll.Continue("ListImages: %v", err)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(50*time.Millisecond))
	v, err := h.rt.Version(ctx, &runtimeapi.VersionRequest{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(v.RuntimeName, "fake"))
}
