package docker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
