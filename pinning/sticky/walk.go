package sticky

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	"github.com/dockpin/cri-dockerd/pinning/containerd"
)

// Media types of the blobs an image record's target leads to.
const (
	mediaOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// maxManifestBytes bounds the index, manifest and config blobs read.
const maxManifestBytes = 8 << 20

// imageContent is what one image's target leads to in the content store.
type imageContent struct {
	// Blobs are the present blobs (index, manifests, configs, layers) by digest, with their sizes.
	Blobs map[string]int64
	// Labels are the image config labels of the platform's manifest (the engine's Config.Labels).
	Labels map[string]string
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociConfig struct {
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"config"`
}

// walkContent finds the blobs of the image whose target is target: the index, every
// manifest of it present in the store (other platforms are usually absent), their
// configs and layers. A missing blob is skipped; the target itself missing is containerd.ErrNoBlob.
func walkContent(ctx context.Context, st containerd.Store, target containerd.Descriptor) (imageContent, error) {
	w := &contentWalk{ctx: ctx, st: st, out: imageContent{Blobs: map[string]int64{}}}
	if err := w.node(target, true); err != nil {
		return imageContent{}, err
	}
	return w.out, nil
}

type contentWalk struct {
	ctx         context.Context
	st          containerd.Store
	out         imageContent
	labelsFound bool // labels come from the host platform's manifest when there is one
}

func (w *contentWalk) node(d containerd.Descriptor, top bool) error {
	b, err := w.st.ReadBlob(w.ctx, d.Digest, maxManifestBytes)
	if errors.Is(err, containerd.ErrNoBlob) && !top {
		return nil
	}
	if err != nil {
		return err
	}
	w.out.Blobs[d.Digest] = int64(len(b))
	var m ociManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("content %s: %w", d.Digest, err)
	}
	mt := d.MediaType
	if mt == "" {
		mt = m.MediaType
	}
	switch {
	case mt == mediaOCIIndex || mt == mediaDockerList || (mt == "" && len(m.Manifests) > 0):
		return w.index(m.Manifests)
	case mt == mediaOCIManifest || mt == mediaDockerManifest || (mt == "" && m.Config.Digest != ""):
		return w.manifest(m)
	}
	return nil // some other blob: leased as it is
}

func (w *contentWalk) index(ms []ociDescriptor) error {
	// The host platform's manifest first, so that its config gives the labels.
	ordered := make([]ociDescriptor, 0, len(ms))
	for _, m := range ms {
		if m.Platform != nil && m.Platform.OS == runtime.GOOS && m.Platform.Architecture == runtime.GOARCH {
			ordered = append(ordered, m)
		}
	}
	for _, m := range ms {
		if m.Platform == nil || m.Platform.OS != runtime.GOOS || m.Platform.Architecture != runtime.GOARCH {
			ordered = append(ordered, m)
		}
	}
	for _, m := range ordered {
		if err := w.node(containerd.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size}, false); err != nil {
			return err
		}
	}
	return nil
}

func (w *contentWalk) manifest(m ociManifest) error {
	if m.Config.Digest != "" {
		b, err := w.st.ReadBlob(w.ctx, m.Config.Digest, maxManifestBytes)
		switch {
		case errors.Is(err, containerd.ErrNoBlob):
		case err != nil:
			return err
		default:
			w.out.Blobs[m.Config.Digest] = int64(len(b))
			var c ociConfig
			if !w.labelsFound && json.Unmarshal(b, &c) == nil {
				w.out.Labels, w.labelsFound = c.Config.Labels, true
			}
		}
	}
	for _, l := range m.Layers {
		size, err := w.st.BlobSize(w.ctx, l.Digest)
		if errors.Is(err, containerd.ErrNoBlob) {
			continue
		}
		if err != nil {
			return err
		}
		w.out.Blobs[l.Digest] = size
	}
	return nil
}
