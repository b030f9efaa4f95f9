package app

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/pinning"
)

func TestPreloadImages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("a.tar", "archive-a")
	write("b.tar.gz", "archive-b")
	write("broken.tar", "not an archive")
	write("notes.txt", "archive-a") // not an archive name: ignored
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "sub.tar"), 0o755))

	fake := dockertest.New()
	fake.AddArchive("archive-a", docker.Image{ID: "sha256:a", RepoTags: []string{"a:1", "a:2"}})
	fake.AddArchive("archive-b", docker.Image{ID: "sha256:b"})
	log := logrus.New()
	log.SetOutput(io.Discard)

	got := preloadImages(fake, dir, log)
	assert.DeepEqual(t, got, []pinning.Preloaded{
		{Tarball: "a.tar", Refs: []string{"a:1", "a:2"}},
		{Tarball: "b.tar.gz", Refs: []string{"sha256:b"}},
	})
	imgs, err := fake.ListImages(t.Context())
	assert.NilError(t, err)
	assert.Equal(t, len(imgs), 2, "the images were loaded into the engine")

	assert.Check(t, preloadImages(fake, filepath.Join(dir, "missing"), log) == nil)
}
