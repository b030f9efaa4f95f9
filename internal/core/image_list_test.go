package core

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

func pinnedByID(resp *runtimeapi.ListImagesResponse) map[string]bool {
	out := map[string]bool{}
	for _, img := range resp.Images {
		out[img.Id] = img.Pinned
	}
	return out
}

func TestListImagesPinned(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinner.Config) {
		c.SandboxImage = "docker.io/rancher/mirrored-pause:3.6"
		c.Patterns = []string{"busybox", "*keyword*"}
		c.LabelSelectors = []string{"team=infra"}
	})
	fake.AddImage(testImage(1, "rancher/mirrored-pause:3.6"))
	fake.AddImage(testImage(2, "busybox:1.36", "busybox:latest"))
	fake.AddImage(testImage(3, "example.com/has-keyword-inside:1"))
	fake.AddImage(docker.Image{ID: id(4), RepoTags: []string{"labelled:1"}, Labels: map[string]string{pin.PinnedLabel: "pinned"}})
	fake.AddImage(docker.Image{ID: id(5), RepoTags: []string{"near-miss:1"}, Labels: map[string]string{pin.PinnedLabel: "true"}})
	fake.AddImage(docker.Image{ID: id(6), RepoTags: []string{"misspelled:1"}, Labels: map[string]string{pin.MisspelledLabel: "pinned"}})
	fake.AddImage(docker.Image{ID: id(7), RepoTags: []string{"infra:1"}, Labels: map[string]string{"team": "infra"}})
	fake.AddImage(testImage(8, "unpinned:1"))
	fake.AddImage(testImage(9)) // untagged

	resp, err := svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	assert.DeepEqual(t, pinnedByID(resp), map[string]bool{
		id(1): true, id(2): true, id(3): true, id(4): true, id(5): false,
		id(6): false, id(7): true, id(8): false, id(9): false,
	})
	for _, img := range resp.Images {
		if img.Id == id(2) {
			assert.DeepEqual(t, img.RepoTags, []string{"busybox:1.36", "busybox:latest"})
			assert.Equal(t, img.Size, uint64(1002))
		}
	}
}

func TestListImagesFilter(t *testing.T) {
	svc, fake := newTestService(t, nil)
	bb := testImage(1, "busybox:1.36", "busybox:latest")
	bb.RepoDigests = []string{"busybox@" + id(3)}
	fake.AddImage(bb)
	fake.AddImage(testImage(2, "registry.k8s.io/pause:3.10"))
	tests := []struct {
		filter string
		want   []string
	}{
		{filter: "", want: []string{id(1), id(2)}},
		{filter: "busybox", want: []string{id(1)}},
		{filter: "docker.io/library/busybox:1.36", want: []string{id(1)}},
		{filter: "busybox:nope", want: nil},
		{filter: "registry.k8s.io/pause:3.10", want: []string{id(2)}},
		{filter: id(2), want: []string{id(2)}},
		{filter: id(2)[7:19], want: []string{id(2)}},
		{filter: id(2)[7:], want: []string{id(2)}},                     // crictl images <full id>
		{filter: "sha256:" + id(2)[7:10], want: []string{id(2)}},       // crictl images sha256:<prefix>
		{filter: "sha256:" + id(3)[7:], want: []string{id(1)}},         // a repo digest
		{filter: "busybox@sha256:" + id(3)[7:], want: []string{id(1)}}, // name@digest
		{filter: "quay.io/busybox", want: nil},
		{filter: "sha256", want: nil}, // a repository name, not an ID
	}
	for _, tc := range tests {
		t.Run(tc.filter, func(t *testing.T) {
			resp, err := svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{
				Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: tc.filter}},
			})
			assert.NilError(t, err)
			var got []string
			for _, img := range resp.Images {
				got = append(got, img.Id)
			}
			assert.DeepEqual(t, got, tc.want)
		})
	}
}

func TestListImagesErrors(t *testing.T) {
	svc, fake := newTestService(t, nil)
	_, err := svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{
		Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "Not A Ref"}},
	})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
	assert.Check(t, is.ErrorContains(err, `"Not A Ref"`))
	for _, bad := range []string{"busy*", "sha256:", "sha256:XYZ", "*"} {
		_, err = svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{
			Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: bad}},
		})
		assert.Check(t, cerrdefs.IsInvalidArgument(err), "%q: got %v", bad, err)
	}

	fake.SetDown(true)
	_, err = svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	fake.SetDown(false)
	_, err = svc.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
}

func benchmarkListImages(b *testing.B, n int) {
	svc, fake := newTestService(b, func(c *pinner.Config) {
		c.Patterns = []string{"registry.example.com/team-3/*", "*keyword*", "busybox:1.36", "quay.io/org/app"}
		c.LabelSelectors = []string{"tier=system"}
	})
	for i := 0; i < n; i++ {
		img := docker.Image{
			ID:          id(i),
			RepoTags:    []string{fmt.Sprintf("registry.example.com/team-%d/app-%d:v1", i%10, i), fmt.Sprintf("app-%d:latest", i)},
			RepoDigests: []string{fmt.Sprintf("registry.example.com/team-%d/app-%d@%s", i%10, i, id(i+1_000_000))},
			Size:        int64(i),
			Labels:      map[string]string{"maintainer": "x", "tier": []string{"system", "app"}[i%2]},
		}
		if i%50 == 0 {
			img.Labels[pin.PinnedLabel] = "pinned"
		}
		fake.AddImage(img)
	}
	ctx := context.Background()
	req := &runtimeapi.ListImagesRequest{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := svc.ListImages(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListImages1000(b *testing.B) { benchmarkListImages(b, 1000) }
func BenchmarkListImages5000(b *testing.B) { benchmarkListImages(b, 5000) }

func TestImageStatusMatchesListImages(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinner.Config) { c.Patterns = []string{"*pin*"} })
	fake.AddImage(docker.Image{ID: id(1), RepoTags: []string{"registry.k8s.io/pause:3.10"}, User: "65535"})
	fake.AddImage(docker.Image{ID: id(2), RepoTags: []string{"to-pin:1"}, User: "www-data:33"})
	fake.AddImage(testImage(3, "plain:1"))
	ctx := context.Background()
	list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	for _, img := range list.Images {
		st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}})
		assert.NilError(t, err)
		assert.Equal(t, st.Image.Pinned, img.Pinned, "image %s", img.Id)
		assert.Equal(t, st.Image.Id, img.Id)
	}
	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10"}})
	assert.NilError(t, err)
	assert.Equal(t, st.Image.GetUid().GetValue(), int64(65535))
	st, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "to-pin:1"}, Verbose: true})
	assert.NilError(t, err)
	assert.Equal(t, st.Image.Username, "www-data")
	var info imageStatusInfo
	assert.NilError(t, json.Unmarshal([]byte(st.Info["info"]), &info))
	assert.Check(t, info.Pinned)
	assert.DeepEqual(t, info.PinReasons, []pin.Reason{{Source: pin.SourcePattern, Detail: "*pin*"}})
}

func TestImageStatusBadInput(t *testing.T) {
	svc, fake := newTestService(t, nil)
	ctx := context.Background()
	for _, ref := range []string{"", "  ", "Upper:1", "a@@b", "busybox:bad tag"} {
		_, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		assert.Check(t, cerrdefs.IsInvalidArgument(err), "ref %q: %v", ref, err)
	}
	_, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{})
	assert.Check(t, cerrdefs.IsInvalidArgument(err))
	assert.Check(t, is.ErrorContains(err, "image reference is empty"))

	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "missing:1"}})
	assert.NilError(t, err)
	assert.Check(t, st.Image == nil)

	fake.SetDown(true)
	_, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "missing:1"}})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

func TestSplitUser(t *testing.T) {
	tests := []struct {
		user    string
		wantUID int64
		hasUID  bool
		name    string
	}{
		{user: ""},
		{user: "0", wantUID: 0, hasUID: true},
		{user: "1000:1000", wantUID: 1000, hasUID: true},
		{user: "www-data", name: "www-data"},
		{user: "www-data:1004", name: "www-data"},
	}
	for _, tc := range tests {
		uid, name := splitUser(tc.user)
		assert.Equal(t, uid != nil, tc.hasUID, tc.user)
		if uid != nil {
			assert.Equal(t, *uid, tc.wantUID)
		}
		assert.Equal(t, name, tc.name)
	}
}

// preloadingPins is a pinner and a PreloadWaiter whose preload directory provides one image: WaitPreloaded
// for it "loads" it into the engine (once) and reports that it waited.
type preloadingPins struct {
	*pinner.Pinner
	fake     *dockertest.Fake
	provides string
	img      docker.Image
	waits    int
}

func (p *preloadingPins) WaitPreloaded(_ context.Context, ref string) bool {
	if ref != p.provides {
		return false
	}
	p.waits++
	p.fake.AddImage(p.img)
	return true
}

// TestImageStatusWaitsForPreload: an absent image that a pending preload file provides
// is looked up again after the wait and answered present; other absent images are
// answered absent without a wait.
func TestImageStatusWaitsForPreload(t *testing.T) {
	pinner, err := pinner.New(pinner.DefaultConfig(), logctx.Discard())
	assert.NilError(t, err)
	fake := dockertest.New()
	pins := &preloadingPins{Pinner: pinner, fake: fake, provides: "preloaded:1", img: testImage(7, "preloaded:1")}
	svc := New(Config{}, Deps{Docker: fake, Pins: pins, Preload: pins, Log: logctx.Discard()})
	ctx := context.Background()
	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "preloaded:1"}})
	assert.NilError(t, err)
	assert.Equal(t, st.GetImage().GetId(), id(7))
	assert.Equal(t, pins.waits, 1)
	st, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "preloaded:1"}})
	assert.NilError(t, err)
	assert.Equal(t, st.GetImage().GetId(), id(7))
	assert.Equal(t, pins.waits, 1, "present: no wait")
	st, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "other:1"}})
	assert.NilError(t, err)
	assert.Check(t, st.Image == nil)
}
