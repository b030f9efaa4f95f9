package preload

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
)

// maxManifestSize bounds what is read of an archive's manifest.json or index.json.
const maxManifestSize = 16 << 20

// maxZstdWindow bounds the memory a zstd frame may ask for (zstd --long=28); an
// archive that needs more is not read before its load (its pins then come from the
// load, and meanwhile from the fail-safe rule of a start with unknown files).
const maxZstdWindow = 1 << 28

// Magic numbers of the compressions k3s and the engine accept for image archives.
var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicBzip2 = []byte("BZh")
	magicXz    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicLz4   = []byte{0x04, 0x22, 0x4d, 0x18}
)

// archiveRefs reads the image references an image archive holds without loading it:
// the RepoTags of `docker save`'s manifest.json, or the image names an OCI layout's
// index.json annotates (containerd's io.containerd.image.name, else
// org.opencontainers.image.ref.name when it is a whole reference). A plain tarball is
// not read through: the tar reader seeks past every layer, so its cost is one read
// per entry header. A compressed one (gzip, bzip2, xz, zstd, lz4, told by its magic
// number, not its name) is decompressed as a stream up to its manifest.json, which
// `docker save` writes after the layers, at the decompressor's speed and in
// constant memory.
func archiveRefs(path string) ([]string, error) {
	f, err := statefile.OpenRegular(path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, closeR, err := decompressed(f)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer closeR()
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
		docker := false
		switch h.Name {
		case "manifest.json", "./manifest.json":
			found, err = dockerManifestRefs(tr)
			docker = true
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
		if docker && len(refs) > 0 {
			break // docker save writes manifest.json after index.json: nothing left to learn
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("archive %s names no image", path)
	}
	return refs, nil
}

// decompressed returns the tar stream of the archive f by the magic number it starts
// with, and what closes the decompressor. A plain tarball is f itself, positioned at
// its start, so that the tar reader can seek past the entries' data.
func decompressed(f *os.File) (io.Reader, func(), error) {
	magic := make([]byte, 6)
	n, err := io.ReadFull(f, magic)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	magic = magic[:n]
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	noClose := func() {}
	br := func() *bufio.Reader { return bufio.NewReaderSize(f, 1<<20) }
	switch {
	case bytes.HasPrefix(magic, magicGzip):
		zr, err := gzip.NewReader(br())
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { _ = zr.Close() }, nil
	case bytes.HasPrefix(magic, magicBzip2):
		return bzip2.NewReader(br()), noClose, nil
	case bytes.HasPrefix(magic, magicXz):
		xr, err := xz.NewReader(br())
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return xr, noClose, nil
	case bytes.HasPrefix(magic, magicZstd):
		zr, err := zstd.NewReader(f, zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	case bytes.HasPrefix(magic, magicLz4):
		return lz4.NewReader(br()), noClose, nil
	}
	return f, noClose, nil
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
