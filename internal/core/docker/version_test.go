package docker

import (
	"context"
	"errors"
	"net/http"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestCheckVersionRefusesOldEngines(t *testing.T) {
	c := versionedEngine(t, "1.41")
	_, err := c.CheckVersion(context.Background())
	assert.Check(t, cerrdefs.IsFailedPrecondition(err))
	assert.Check(t, is.ErrorContains(err, "speaks API 1.41, but cri-dockerd needs API 1.42"))

	c = versionedEngine(t, "1.42")
	v, err := c.CheckVersion(context.Background())
	assert.NilError(t, err)
	assert.Equal(t, v.NegotiatedAPIVersion, "1.42")
}

func TestUnreachableEngineIsUnavailable(t *testing.T) {
	c, err := NewSDKClient("unix://" + t.TempDir() + "/no.sock")
	assert.NilError(t, err)
	_, err = c.ListImages(context.Background())
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	_, err = c.InspectImage(context.Background(), "x")
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

// TestSDKStatusErrorsKeepTheirKind: the SDK's own HTTP errors (not errdefs-wrapped)
// must keep their kind through classify, so the gRPC code is right.
func TestSDKStatusErrorsKeepTheirKind(t *testing.T) {
	tests := []struct {
		status int
		want   func(error) bool
	}{
		{status: http.StatusNotFound, want: cerrdefs.IsNotFound},
		{status: http.StatusBadRequest, want: cerrdefs.IsInvalidArgument},
		{status: http.StatusConflict, want: cerrdefs.IsConflict},
		{status: http.StatusUnauthorized, want: cerrdefs.IsUnauthorized},
		{status: http.StatusServiceUnavailable, want: cerrdefs.IsUnavailable},
		{status: http.StatusInternalServerError, want: cerrdefs.IsInternal},
	}
	for _, tc := range tests {
		c := engineAnswering(t, tc.status, "engine says no")
		_, err := c.InspectImage(context.Background(), "x:1")
		assert.Check(t, tc.want(err), "status %d: %v", tc.status, err)
		assert.Check(t, !errors.Is(cerrdefs.Resolve(err), cerrdefs.ErrUnknown), "status %d: the kind must be visible to Resolve (used by the gRPC conversion): %v", tc.status, err)
	}
}
