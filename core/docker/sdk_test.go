package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	cerrdefs "github.com/containerd/errdefs"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/registry"
	"gotest.tools/v3/assert"
)

func TestReadPullStream(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ok := `{"status":"Pulling from library/x"}` + "\n" + `{"status":"Digest: sha256:aa"}` + "\n"
	assert.NilError(t, readPullStream(ctx, cancel, strings.NewReader(ok), time.Minute))

	bad := `{"status":"Pulling"}` + "\n" + `{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}` + "\n"
	assert.Error(t, readPullStream(ctx, cancel, strings.NewReader(bad), 0), "manifest unknown")
}

// silentReader blocks until its context ends, as an engine that stops sending progress.
type silentReader struct{ ctx context.Context }

func (r silentReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, io.ErrUnexpectedEOF
}

func TestReadPullStreamProgressDeadline(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	err := readPullStream(ctx, cancel, silentReader{ctx}, 20*time.Millisecond)
	assert.Check(t, err != nil)
	assert.Check(t, errors.Is(context.Cause(ctx), errNoProgress), "cause %v", context.Cause(ctx))
}

func TestEncodeAuth(t *testing.T) {
	enc, err := encodeAuth(AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte("user:pa:ss")), ServerAddress: "r.example"})
	assert.NilError(t, err)
	raw, err := base64.URLEncoding.DecodeString(enc)
	assert.NilError(t, err)
	var got registry.AuthConfig
	assert.NilError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, got.Username, "user")
	assert.Equal(t, got.Password, "pa:ss")
	assert.Equal(t, got.ServerAddress, "r.example")

	_, err = encodeAuth(AuthConfig{Auth: "%%%"})
	assert.ErrorContains(t, err, "not base64")
}

func TestRealRefs(t *testing.T) {
	assert.DeepEqual(t, realRefs([]string{"<none>:<none>", "a:1", "", "<none>@<none>"}), []string{"a:1"})
}

func TestLoadImagesReadsLoadedReferences(t *testing.T) {
	for _, tc := range []struct {
		body    string
		want    []string
		wantErr string
	}{
		{body: `{"stream":"Loaded image: e2e/l:1\n"}` + "\n" + `{"stream":"Loaded image: e2e/l:2\n"}`, want: []string{"e2e/l:1", "e2e/l:2"}},
		{body: `{"stream":"Loaded image ID: sha256:abc\n"}`, want: []string{"sha256:abc"}},
		{body: `{"error":"invalid archive: does not contain a manifest.json","errorDetail":{"message":"invalid archive: does not contain a manifest.json"}}`, wantErr: "invalid archive"},
	} {
		c := engineStreaming(t, tc.body)
		got, err := c.LoadImages(context.Background(), strings.NewReader("archive"))
		if tc.wantErr != "" {
			assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
			assert.ErrorContains(t, err, tc.wantErr)
			continue
		}
		assert.NilError(t, err)
		assert.DeepEqual(t, got, tc.want)
	}
}
