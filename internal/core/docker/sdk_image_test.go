package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/registry"
	"gotest.tools/v3/assert"
)

func TestReadPullStream(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	progress := 0
	ok := `{"status":"Pulling from library/x"}` + "\n" + `{"status":"Digest: sha256:aa"}` + "\n"
	assert.NilError(t, readPullStream(ctx, strings.NewReader(ok), func() { progress++ }))
	assert.Equal(t, progress, 2)

	bad := `{"status":"Pulling"}` + "\n" + `{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}` + "\n"
	assert.Error(t, readPullStream(ctx, strings.NewReader(bad), func() {}), "manifest unknown")
}

// silentReader blocks until its context ends, as an engine that stops sending progress.
type silentReader struct{ ctx context.Context }

func (r silentReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, io.ErrUnexpectedEOF
}

func TestProgressWatchdog(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := watchProgress(20*time.Millisecond, cancel)
	defer w.stop()
	err := readPullStream(ctx, silentReader{ctx}, w.progress)
	assert.Check(t, err != nil)
	assert.Check(t, errors.Is(context.Cause(ctx), errNoProgress), "cause %v", context.Cause(ctx))

	var none *progressWatchdog // deadline 0: never fires, and its methods are safe
	none.progress()
	none.stop()
	assert.Check(t, watchProgress(0, cancel) == nil)
}

// TestPullStalledBeforeAnyProgress: an engine that sends nothing at all (the registry
// stalls while the engine resolves the manifest) is cut off by the deadline too.
func TestPullStalledBeforeAnyProgress(t *testing.T) {
	// Without the watchdog the call would end after the stall with another error.
	c := engineStalling(t, 10*time.Second)
	err := c.PullImage(context.Background(), "127.0.0.1:1/stalled:1", PullOptions{ProgressDeadline: 100 * time.Millisecond})
	assert.Check(t, cerrdefs.IsDeadlineExceeded(err), "got %v", err)
	assert.Check(t, errors.Is(err, errNoProgress), "got %v", err)
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

func TestImageFsUsage(t *testing.T) {
	root := t.TempDir()
	var types []string
	c := routedEngine(t, map[string]http.HandlerFunc{
		"GET /info": answer(http.StatusOK, `{"DockerRootDir":"`+root+`"}`),
		"GET /system/df": func(w http.ResponseWriter, r *http.Request) {
			types = r.URL.Query()["type"]
			_, _ = w.Write([]byte(`{"LayersSize":3000,"Containers":[{"Id":"a","SizeRw":100},{"Id":"b","SizeRw":20},{"Id":"c","SizeRw":-1}]}`))
		},
	})
	u, err := c.ImageFsUsage(context.Background())
	assert.NilError(t, err)
	assert.DeepEqual(t, types, []string{"image", "container"})
	assert.Equal(t, u.Mountpoint, root)
	assert.Equal(t, u.UsedBytes, uint64(3000))
	assert.Equal(t, u.ContainersUsedBytes, uint64(120))
	assert.Check(t, u.InodesUsed > 0, "the temp dir's filesystem counts inodes")
}
