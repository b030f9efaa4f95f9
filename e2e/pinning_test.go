//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pushPullDigest pushes a fresh image to the local registry, removes it and pulls it
// back through the binary's PullImage, so that it has a RepoDigest; it returns the ID
// and digest ref. The ID is the engine's: a patched upstream's PullImage returns a
// repo digest as image_ref (upstream-facts.md), ours the ID.
func pushPullDigest(t *testing.T, s *shim, repo string) (id, digestRef string) {
	t.Helper()
	ref := env.registry + "/" + env.store + "/" + repo + ":1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)
	_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	assert.NilError(t, err)
	digests := docker(t, "image", "inspect", "--format", "{{range .RepoDigests}}{{.}} {{end}}", ref)
	digestRef = strings.Fields(digests)[0]
	assert.Assert(t, strings.Contains(digestRef, "@sha256:"), digests)
	return imageID(t, ref), digestRef
}

// TestPinnedImagesCrictl is the headline acceptance test: crictl images -o json shows
// pinned true exactly for the images that one of the pin sources names.
func TestPinnedImagesCrictl(t *testing.T) {
	puller := startShim(t)
	digestID, digestRef := pushPullDigest(t, puller, "by-digest")
	sandboxDigestID, sandboxDigestRef := pushPullDigest(t, puller, "pause-digest")

	configLabelID := importImage(t, "e2e/config-label:1", "io.cri-containerd.pinned=pinned")
	want := map[string]bool{
		importImage(t, "registry.k8s.io/pause:3.10"): true,
		configLabelID:                                                         true,
		importImage(t, "e2e/exact:1"):                                         true,
		importImage(t, "e2e/exact:2"):                                         false,
		digestID:                                                              true,
		importImage(t, "e2e/bare:1"):                                          true,
		importImage(t, "e2e/bare:2"):                                          true,
		importImage(t, "e2e/bare-other:1"):                                    false,
		importImage(t, "e2e/prefixed-a:1"):                                    true,
		importImage(t, "e2e/has-kwmagic-inside:1"):                            true,
		importImage(t, "e2e/team-label:1", "team=infra"):                      true,
		importImage(t, "e2e/team-other:1", "team=apps"):                       false,
		importImage(t, "e2e/value-true:1", "io.cri-containerd.pinned=true"):   false,
		importImage(t, "e2e/misspelled:1", "io.cri.containerd.pinned=pinned"): false,
		importImage(t, "e2e/plain:1"):                                         false,
		importImage(t, "rancher/mirrored-pause:3.6"):                          false,
		sandboxDigestID:                                                       false,
	}
	s := startShim(t,
		"--pod-infra-container-image", "registry.k8s.io/pause:3.10",
		"--pinned-images", "docker.io/e2e/exact:1,"+digestRef+",e2e/bare,e2e/prefixed-*",
		"--pinned-images", "*kwmagic*",
		"--pinned-image-labels", "team=infra",
	)
	got := s.crictlImages(t)
	for id, pinned := range want {
		img, ok := got[id]
		assert.Assert(t, ok, "image %s missing from crictl images", id)
		assert.Check(t, img.Pinned == pinned, "image %v: pinned=%v, want %v", img.RepoTags, img.Pinned, pinned)
	}
	for id, img := range got {
		if _, ours := want[id]; !ours {
			assert.Check(t, !img.Pinned, "image %v (%s) is pinned but nothing names it", img.RepoTags, id)
		}
	}
	assertStatusMatchesList(t, s)
	assert.Check(t, strings.Contains(s.log(t), "io.cri.containerd.pinned"), "no warning about the misspelled label key")

	// The sandbox image given as a familiar name and by digest, on shims of their own.
	for _, tc := range []struct{ flag, id string }{
		{flag: "docker.io/rancher/mirrored-pause:3.6", id: imageID(t, "rancher/mirrored-pause:3.6")},
		{flag: sandboxDigestRef, id: sandboxDigestID},
	} {
		t.Run("sandbox "+tc.flag, func(t *testing.T) {
			s := startShim(t, "--pod-infra-container-image", tc.flag)
			got := s.crictlImages(t)
			for id := range want {
				// Without the operator flags, only the sandbox image and the config label pin.
				wantPinned := id == tc.id || id == configLabelID
				assert.Check(t, got[id].Pinned == wantPinned, "image %v: pinned=%v, want %v", got[id].RepoTags, got[id].Pinned, wantPinned)
			}
			assertStatusMatchesList(t, s)
		})
	}
}

// assertStatusMatchesList checks that ImageStatus (gRPC and crictl inspecti) reports
// the same pinned value as ListImages for every image.
func assertStatusMatchesList(t *testing.T, s *shim) {
	t.Helper()
	ctx := context.Background()
	list, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	for _, img := range list.Images {
		st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}, Verbose: true})
		assert.NilError(t, err)
		assert.Assert(t, st.Image != nil, "ImageStatus(%s) is empty", img.Id)
		assert.Check(t, st.Image.Pinned == img.Pinned, "image %v: ImageStatus.pinned=%v, ListImages.pinned=%v", img.RepoTags, st.Image.Pinned, img.Pinned)
	}
	if len(list.Images) == 0 {
		return
	}
	img := list.Images[0]
	var inspect struct {
		Status struct {
			Pinned bool `json:"pinned"`
		} `json:"status"`
		Info map[string]json.RawMessage `json:"info"`
	}
	raw := s.crictl(t, "inspecti", "-o", "json", img.Id)
	assert.NilError(t, json.Unmarshal([]byte(raw), &inspect), raw)
	assert.Equal(t, inspect.Status.Pinned, img.Pinned, fmt.Sprintf("crictl inspecti %v", img.RepoTags))
}
