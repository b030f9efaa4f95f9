package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// ImageID returns a valid image ID ("sha256:" and 64 hex digits) made from n;
// distinct n give distinct IDs.
func ImageID(n int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(n)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Image returns a test image: ID ImageID(n), tagged tags, of 1000+n bytes.
func Image(n int, tags ...string) docker.Image {
	return docker.Image{ID: ImageID(n), RepoTags: tags, Size: int64(1000 + n)}
}

// AddImage stores img (replacing an image with the same ID) and moves its tags to it.
func (f *Fake) AddImage(img docker.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, other := range f.images {
		other.RepoTags = slices.DeleteFunc(other.RepoTags, func(t string) bool { return slices.Contains(img.RepoTags, t) })
	}
	cp := clone(img)
	f.images[img.ID] = &cp
	f.publish("import", img.ID, img.ID)
	for _, t := range img.RepoTags {
		f.publish("tag", img.ID, t)
	}
}

// AddArchive makes an archive whose bytes are content loadable: LoadImages adds imgs.
func (f *Fake) AddArchive(content string, imgs ...docker.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.archives[content] = imgs
}

// LoadImages implements docker.Client for archives registered with AddArchive.
func (f *Fake) LoadImages(ctx context.Context, archive io.Reader) ([]string, error) {
	content, err := io.ReadAll(archive)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	imgs, ok := f.archives[string(content)]
	f.mu.Unlock()
	if err := f.Ping(ctx); err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("load images: invalid archive: %w", cerrdefs.ErrInvalidArgument)
	}
	var refs []string
	for _, img := range imgs {
		f.AddImage(img)
		if len(img.RepoTags) == 0 {
			refs = append(refs, img.ID)
		}
		refs = append(refs, img.RepoTags...)
	}
	return refs, nil
}

// Tag adds tag to the image ref names (moving it from any other image), as docker tag.
func (f *Fake) Tag(ref, tag string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.lookup(ref)
	if img == nil {
		return fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	for _, other := range f.images {
		other.RepoTags = slices.DeleteFunc(other.RepoTags, func(t string) bool { return t == tag })
	}
	img.RepoTags = append(img.RepoTags, tag)
	f.publish("tag", img.ID, tag)
	return nil
}

// QuietTag adds tag like Tag but publishes no event, as a missed event would.
func (f *Fake) QuietTag(ref, tag string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img := f.lookup(ref); img != nil {
		img.RepoTags = append(img.RepoTags, tag)
	}
}

// AddRemote makes ref pullable; the pulled image is img, tagged ref.
func (f *Fake) AddRemote(ref string, img docker.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registry[imageref.Key(ref)] = img
}

// Pulls returns the options of every pull so far.
func (f *Fake) Pulls() []docker.PullOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pulls)
}

// ListImages implements docker.Client; images come sorted by ID.
func (f *Fake) ListImages(ctx context.Context) (_ []docker.Image, err error) {
	defer f.replied(ctx, "ListImages", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "ListImages"); err != nil {
		return nil, err
	}
	out := make([]docker.Image, 0, len(f.images))
	for _, img := range f.images {
		cp := clone(*img)
		cp.User = ""
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b docker.Image) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// InspectImage implements docker.Client.
func (f *Fake) InspectImage(ctx context.Context, ref string) (_ docker.Image, err error) {
	defer f.replied(ctx, "InspectImage", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "InspectImage"); err != nil {
		return docker.Image{}, err
	}
	img := f.lookup(ref)
	if img == nil {
		return docker.Image{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	return clone(*img), nil
}

// clone copies img deeply, so callers never share the fake's slices and maps.
func clone(img docker.Image) docker.Image {
	img.RepoTags = slices.Clone(img.RepoTags)
	img.RepoDigests = slices.Clone(img.RepoDigests)
	img.Labels = maps.Clone(img.Labels)
	return img
}

// PullImage implements docker.Client: the remote image replaces the tag locally.
func (f *Fake) PullImage(ctx context.Context, ref string, opts docker.PullOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "PullImage"); err != nil {
		return err
	}
	f.pulls = append(f.pulls, opts)
	remote, ok := f.registry[imageref.Key(ref)]
	if !ok {
		return fmt.Errorf("pull %s: manifest unknown: %w", ref, cerrdefs.ErrNotFound)
	}
	tag := familiar(ref)
	for _, other := range f.images {
		other.RepoTags = slices.DeleteFunc(other.RepoTags, func(t string) bool { return t == tag })
	}
	img, ok := f.images[remote.ID]
	if !ok {
		cp := clone(remote)
		cp.RepoTags = nil
		img = &cp
		f.images[remote.ID] = img
	}
	if !slices.Contains(img.RepoTags, tag) && !strings.Contains(ref, "@") {
		img.RepoTags = append(img.RepoTags, tag)
	}
	f.publish("pull", ref, ref)
	return nil
}

// RemoveImage implements docker.Client: the image ref resolves to goes, with all its
// references.
func (f *Fake) RemoveImage(ctx context.Context, ref string) (err error) {
	defer f.replied(ctx, "RemoveImage", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "RemoveImage"); err != nil {
		return err
	}
	img := f.lookup(ref)
	if img == nil {
		return fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	for _, t := range img.RepoTags {
		f.publish("untag", img.ID, t)
	}
	delete(f.images, img.ID)
	f.publish("delete", img.ID, img.ID)
	return nil
}

// Untag removes one tag, and the image when it was the last, as docker rmi TAG.
func (f *Fake) Untag(tag string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.lookup(tag)
	if img == nil || isID(img, tag) {
		return fmt.Errorf("no such tag: %s: %w", tag, cerrdefs.ErrNotFound)
	}
	fam := familiar(tag)
	img.RepoTags = slices.DeleteFunc(img.RepoTags, func(t string) bool { return t == fam })
	f.publish("untag", img.ID, fam)
	if len(img.RepoTags) == 0 {
		delete(f.images, img.ID)
		f.publish("delete", img.ID, img.ID)
	}
	return nil
}

// ImageFsUsage implements docker.Client.
func (f *Fake) ImageFsUsage(ctx context.Context) (_ docker.ImageFsUsage, err error) {
	defer f.replied(ctx, "ImageFsUsage", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "ImageFsUsage"); err != nil {
		return docker.ImageFsUsage{}, err
	}
	out := docker.ImageFsUsage{Mountpoint: f.info.DockerRootDir, InodesUsed: f.fsInodesUsed}
	for _, img := range f.images {
		out.UsedBytes += uint64(img.Size)
	}
	for _, c := range f.containers {
		out.ContainersUsedBytes += uint64(max(c.sizeRw, 0))
	}
	return out, nil
}

func (f *Fake) lookup(ref string) *docker.Image {
	for _, img := range f.images {
		if isID(img, ref) {
			return img
		}
	}
	fam := familiar(ref)
	if !strings.Contains(ref, "@") && !strings.Contains(fam, ":") {
		fam += ":latest"
	}
	for _, img := range f.images {
		if slices.Contains(img.RepoTags, fam) || slices.Contains(img.RepoDigests, fam) {
			return img
		}
	}
	return nil
}

func isID(img *docker.Image, ref string) bool {
	hex := strings.TrimPrefix(img.ID, "sha256:")
	r := strings.TrimPrefix(ref, "sha256:")
	return ref == img.ID || (len(r) >= 12 && strings.HasPrefix(hex, r))
}

// familiar is the short form the engine shows for ref; ref itself when it does not parse.
func familiar(ref string) string {
	r, err := imageref.Parse(ref)
	if err != nil {
		return ref
	}
	return r.Defaulted().Familiar()
}

// SetFsInodesUsed sets the inodes ImageFsUsage reports in use on the engine's filesystem.
func (f *Fake) SetFsInodesUsed(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fsInodesUsed = n
}
