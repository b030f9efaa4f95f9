//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func spec(ref string) *runtimeapi.ImageSpec { return &runtimeapi.ImageSpec{Image: ref} }

func TestPullImageFromLocalRegistry(t *testing.T) {
	s := startShim(t)
	ctx := context.Background()
	ref := env.registry + "/" + env.store + "/pull-me:1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)

	resp, err := s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
	assert.NilError(t, err)
	list, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: spec(ref)}})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Images), 1)
	assert.Equal(t, resp.ImageRef, list.Images[0].Id, "PullImage must return the id that ListImages reports")
	st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(resp.ImageRef)})
	assert.NilError(t, err)
	assert.Equal(t, st.Image.Id, resp.ImageRef)

	// crictl pull goes through the same RPC.
	docker(t, "rmi", ref)
	out := s.crictl(t, "pull", ref)
	assert.Check(t, strings.Contains(out, resp.ImageRef), out)

	// RemoveImage by repo digest removes the image (as by ID or tag).
	digests := strings.Fields(docker(t, "image", "inspect", "--format", "{{range .RepoDigests}}{{.}} {{end}}", ref))
	assert.Assert(t, len(digests) > 0, "a pulled image has a repo digest")
	_, err = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(digests[0])})
	assert.NilError(t, err)
	st, err = s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(resp.ImageRef)})
	assert.NilError(t, err)
	assert.Check(t, st.Image == nil, "image still there after RemoveImage(%s)", digests[0])
}

func TestPullImageRegistryUnavailable(t *testing.T) {
	s := startShim(t)
	// Port 1 on loopback: nothing listens there, so the connection is refused at once.
	_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: spec("127.0.0.1:1/nothing/here:1")})
	assert.Assert(t, err != nil)
	msg := status.Convert(err).Message()
	assert.Check(t, strings.HasPrefix(msg, "RegistryUnavailable"), "message %q must start with kubelet's ErrRegistryUnavailable", msg)
	assert.Equal(t, status.Code(err), codes.Unavailable)
}

func TestPullImageNotFound(t *testing.T) {
	s := startShim(t)
	_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: spec(env.registry + "/" + env.store + "/never-pushed:1")})
	assert.Equal(t, status.Code(err), codes.NotFound, "a missing image is NotFound: %v", err)
}

func TestImageServiceBadInput(t *testing.T) {
	s := startShim(t)
	ctx := context.Background()
	for _, ref := range []string{"", "Upper:1", "a@@b", "busybox:bad tag", "-leading-dash"} {
		_, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(ref)})
		assert.Check(t, status.Code(err) == codes.InvalidArgument, "ImageStatus(%q): %v", ref, err)
		_, err = s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
		assert.Check(t, status.Code(err) == codes.InvalidArgument, "PullImage(%q): %v", ref, err)
		_, err = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)})
		assert.Check(t, status.Code(err) == codes.InvalidArgument, "RemoveImage(%q): %v", ref, err)
	}
	_, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{})
	assert.Check(t, status.Code(err) == codes.InvalidArgument)
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "image reference is empty"), err)

	st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec("e2e/never-existed:1")})
	assert.NilError(t, err)
	assert.Check(t, st.Image == nil, "ImageStatus of an unknown image must be empty, got %v", st.Image)
	_, err = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec("e2e/never-existed:1")})
	assert.NilError(t, err, "RemoveImage of an unknown image must succeed")
}

func TestRemoveImage(t *testing.T) {
	s := startShim(t, "--pinned-images", "e2e/remove-pinned")
	ctx := context.Background()
	multi := importImage(t, "e2e/remove-multi:1")
	docker(t, "tag", "e2e/remove-multi:1", "e2e/remove-multi:2")
	pinned := importImage(t, "e2e/remove-pinned:1")

	for _, ref := range []string{multi, "e2e/remove-pinned:1"} {
		_, err := s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)})
		assert.NilError(t, err, ref)
		_, err = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)})
		assert.NilError(t, err, "second removal of %s must succeed", ref)
	}
	got, err := s.listPinned(ctx)
	assert.NilError(t, err)
	_, stillMulti := got[multi]
	_, stillPinned := got[pinned]
	assert.Check(t, !stillMulti, "image with two tags not removed by ID")
	assert.Check(t, !stillPinned, "a pinned image must still be removed when asked")
	assert.Check(t, strings.Contains(s.log(t), "removing pinned image as requested"))
}

func TestVersionAndStatus(t *testing.T) {
	s := startShim(t, "--pinned-images", "e2e/status-*")
	ctx := context.Background()
	importImage(t, "e2e/status-image:1")
	v, err := s.rt.Version(ctx, &runtimeapi.VersionRequest{})
	assert.NilError(t, err)
	assert.Equal(t, v.RuntimeName, "docker")
	assert.Equal(t, v.RuntimeApiVersion, "v1")
	assert.Equal(t, v.RuntimeVersion, strings.TrimSpace(docker(t, "version", "--format", "{{.Server.Version}}")))

	st, err := s.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	for _, c := range st.Status.Conditions {
		assert.Check(t, c.Status, "condition %s: %s", c.Type, c.Message)
	}
	assert.Check(t, strings.Contains(st.Info["pinning"], "e2e/status-*"), st.Info["pinning"])
	info := s.crictl(t, "info")
	assert.Check(t, strings.Contains(info, "e2e/status-*"), info)

	fs, err := s.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	assert.NilError(t, err)
	assert.Assert(t, len(fs.ImageFilesystems) == 1)
	assert.Check(t, fs.ImageFilesystems[0].UsedBytes.Value > 0)

	// On an engine older than one of our features (Docker 23 to 28.4) the log names each
	// missing feature once, at start; the engine matrix runs this on each.
	api := strings.TrimSpace(docker(t, "version", "--format", "{{.Server.APIVersion}}"))
	limits := regexp.MustCompile(`engine API ([0-9.]+) is older than ([0-9.]+) \(Docker [0-9.]+\) for ([^"]*)`).
		FindAllStringSubmatch(s.log(t), -1)
	for _, l := range limits {
		assert.Check(t, l[1] == api && apiMinor(t, l[1]) < apiMinor(t, l[2]), "engine API %s: %q", api, l[0])
	}
	switch minor := apiMinor(t, api); {
	case minor < 43:
		assert.Check(t, len(limits) == 5 && strings.Contains(limits[0][3], "one runc shim per pod"), "engine API %s: %q", api, limits)
	case minor >= 51:
		assert.Check(t, len(limits) == 0, "engine API %s: %q", api, limits)
	default:
		assert.Check(t, len(limits) > 0, "engine API %s names no missing feature", api)
	}
}

// apiMinor is the minor number of an Engine API version ("1.44" is 44).
func apiMinor(t *testing.T, v string) int {
	t.Helper()
	minor, ok := strings.CutPrefix(v, "1.")
	n, err := strconv.Atoi(minor)
	assert.Assert(t, ok && err == nil, "engine API version %q", v)
	return n
}
