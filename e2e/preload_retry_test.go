//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// fullDiskEngine serves the engine's API on a socket of its own and answers the first
// fails image loads as an engine whose disk is full does (500, "no space left on
// device"), after reading the archive; everything else goes to the engine.
type fullDiskEngine struct {
	sock  string
	fails atomic.Int32
}

func startFullDiskEngine(t *testing.T, fails int) *fullDiskEngine {
	t.Helper()
	e := &fullDiskEngine{sock: filepath.Join(t.TempDir(), "docker.sock")}
	e.fails.Store(int32(fails))
	target := strings.TrimPrefix(env.dockerHost, "unix://")
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", target)
		}},
		FlushInterval: -1, // events and logs stream
	}
	lis, err := net.Listen("unix", e.sock)
	assert.NilError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/images/load") && e.fails.Add(-1) >= 0 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"message":"write /var/lib/docker/tmp/docker-import-1/layer.tar: no space left on device"}`)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// TestPreloadLoadRetriedAfterFullDisk: an archive whose load fails on a full disk
// keeps its image pinned (from its manifest), says so (state failed, loadFailures,
// retryAt), and loads by itself at the retry, without anyone touching the file.
func TestPreloadLoadRetriedAfterFullDisk(t *testing.T) {
	dir := t.TempDir()
	const tag = "e2e/full-disk:1"
	id := importImage(t, tag)
	archive := filepath.Join(dir, "full-disk.tar")
	docker(t, "save", "-o", archive, tag)
	docker(t, "rmi", tag)
	old := time.Now().Add(-time.Hour)
	assert.NilError(t, os.Chtimes(archive, old, old))
	engine := startFullDiskEngine(t, 1)
	start := time.Now()
	s := startShim(t, "--preload-images-dir", dir, "--docker-endpoint", "unix://"+engine.sock)

	failed := waitPreload(t, s, 30*time.Second, fileState("full-disk.tar", "failed")).file("full-disk.tar")
	assert.Check(t, strings.Contains(failed.Failed, "no space left on device"), failed.Failed)
	assert.Check(t, failed.Origin == "manifest" && slices.Contains(failed.Refs, tag), "pinned from its manifest: %+v", failed)
	info := s.crictl(t, "info")
	assert.Check(t, strings.Contains(info, `"loadFailures": 1`) && strings.Contains(info, `"retryAt"`), info)

	waitPreload(t, s, time.Minute, fileState("full-disk.tar", "loaded"))
	waitListPinned(t, s, id, true)
	t.Logf("failed once on a full disk, loaded by its retry %.1fs after the start", time.Since(start).Seconds())
}
