package docker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeEngine answers /_ping and /version as an engine speaking apiVersion would.
func fakeEngine(t *testing.T, apiVersion string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			_, _ = w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/version"):
			_, _ = w.Write([]byte(`{"Version":"20.10.24","ApiVersion":"` + apiVersion + `","MinAPIVersion":"1.12"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + strings.TrimPrefix(srv.URL, "http://")
}

func TestCheckVersionRefusesOldEngines(t *testing.T) {
	c, err := NewSDKClient(fakeEngine(t, "1.41"))
	assert.NilError(t, err)
	_, err = c.CheckVersion(context.Background())
	assert.Check(t, cerrdefs.IsFailedPrecondition(err))
	assert.Check(t, is.ErrorContains(err, "speaks API 1.41, but cri-dockerd needs API 1.42"))

	c, err = NewSDKClient(fakeEngine(t, "1.42"))
	assert.NilError(t, err)
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

// engineAnswering is an engine that answers every image request with status and message.
func engineAnswering(t *testing.T, status int, message string) *SDKClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.51")
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"message":"` + message + `"}`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewSDKClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	assert.NilError(t, err)
	return c
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

// engineStreaming is an engine whose /images/load answers with body (a JSON stream).
func engineStreaming(t *testing.T, body string) *SDKClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.51")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := NewSDKClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	assert.NilError(t, err)
	return c
}

// engineStalling is an engine whose /images/create sends nothing for stall.
func engineStalling(t *testing.T, stall time.Duration) *SDKClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.51")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		select {
		case <-time.After(stall):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	c, err := NewSDKClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	assert.NilError(t, err)
	return c
}
