package core

import (
	"context"
	"encoding/json"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/pinning"
)

func TestImageStatusMatchesListImages(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinning.Config) { c.Patterns = []string{"*pin*"} })
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
	assert.DeepEqual(t, info.PinReasons, []pinning.Reason{{Source: pinning.SourcePattern, Detail: "*pin*"}})
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
