//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSandboxNameConflict: a sandbox whose engine name is held by another container
// behaves as upstream cri-dockerd's on the real engine: a stopped holder is removed and
// the create fails (kubelet retries, and the retry gets the plain name); a running
// holder fails the create and is left alone.
func TestSandboxNameConflict(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()
	cfg := podConfig("conflict")
	name := "k8s_POD_conflict_e2e_uid-conflict_1"

	holder := docker(t, "create", "--name", name, "--network", "none", pauseRef)
	t.Cleanup(func() { _, _ = dockerErr(nil, "rm", "-f", holder) })
	_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Equal(t, status.Code(err), codes.AlreadyExists, "%v", err)
	_, err = dockerErr(nil, "inspect", holder)
	assert.ErrorContains(t, err, "No such", "the stopped holder is removed")
	id := runPod(t, s, cfg) // kubelet's retry
	t.Cleanup(func() { stopAndRemovePod(t, s, id) })
	assert.Equal(t, docker(t, "inspect", "--format", "{{.Name}}", id), "/"+name)

	// Now the name is held by the running sandbox itself: a second create fails and
	// makes no second sandbox with a random suffix.
	_, err = s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Equal(t, status.Code(err), codes.AlreadyExists, "%v", err)
	assert.Equal(t, docker(t, "inspect", "--format", "{{.State.Status}}", id), "running")
	all := docker(t, "ps", "-a", "--format", "{{.Names}}", "--filter", "name=k8s_POD_conflict_")
	assert.Assert(t, !regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(all), "suffixed sandbox made: %s", all)
}
