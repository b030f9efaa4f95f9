package preload

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
)

// maxManifestSize bounds what is read of an archive's manifest.json or index.json.
const maxManifestSize = 16 << 20

// archiveRefs reads the image references an image archive holds without loading it:
// the RepoTags of `docker save`'s manifest.json, or the image names an OCI layout's
// index.json annotates (containerd's io.containerd.image.name, else
// org.opencontainers.image.ref.name when it is a whole reference). It reads plain,
// gzip and bzip2 tarballs; other compressions are left to the saved state.
func archiveRefs(path string) ([]string, error) {
	f, err := statefile.OpenRegular(path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := decompressed(bufio.NewReader(f))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(r)
	var refs []string
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", path, err)
		}
		var found []string
		switch h.Name {
		case "manifest.json", "./manifest.json":
			found, err = dockerManifestRefs(tr)
		case "index.json", "./index.json":
			found, err = ociIndexRefs(tr)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("archive %s: %s: %w", path, h.Name, err)
		}
		for _, ref := range found {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("archive %s names no image", path)
	}
	return refs, nil
}

// decompressed returns r decompressed by the magic bytes it starts with.
func decompressed(r *bufio.Reader) (io.Reader, error) {
	magic, err := r.Peek(3)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return gzip.NewReader(r)
	case bytes.HasPrefix(magic, []byte("BZh")):
		return bzip2.NewReader(r), nil
	}
	return r, nil
}

func dockerManifestRefs(r io.Reader) ([]string, error) {
	var manifest []struct {
		RepoTags []string `json:"RepoTags"`
	}
	if err := json.NewDecoder(io.LimitReader(r, maxManifestSize)).Decode(&manifest); err != nil {
		return nil, err
	}
	var refs []string
	for _, m := range manifest {
		refs = append(refs, m.RepoTags...)
	}
	return refs, nil
}

func ociIndexRefs(r io.Reader) ([]string, error) {
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.NewDecoder(io.LimitReader(r, maxManifestSize)).Decode(&index); err != nil {
		return nil, err
	}
	var refs []string
	for _, m := range index.Manifests {
		if name := m.Annotations["io.containerd.image.name"]; name != "" {
			refs = append(refs, name)
		} else if name := m.Annotations["org.opencontainers.image.ref.name"]; imagerefLike(name) {
			refs = append(refs, name)
		}
	}
	return refs, nil
}

// imagerefLike tells whether an OCI ref.name annotation is a whole image reference
// ("registry/app:1"), not just a tag ("1", "latest") as OCI layouts may write it.
func imagerefLike(name string) bool {
	return strings.ContainsAny(name, "/:") && imageref.Check(name) == nil
}
