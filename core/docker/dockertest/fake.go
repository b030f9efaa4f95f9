// Package dockertest provides Fake, an in-memory docker.Client that keeps state
// (images with tags and digests, a remote registry to pull from) so that tests of
// package core check results, not call sequences. Errors can be injected per
// method, and the whole engine can be taken down to test outage handling.
package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/imageref"
)

// Fake is a stateful in-memory engine. The zero value is not usable; call New.
type Fake struct {
	mu       sync.Mutex
	images   map[string]*docker.Image // by ID
	registry map[string]docker.Image  // pullable images by normalised reference
	errs     map[string]error         // injected error per method name
	down     bool
	info     docker.Info
	version  docker.Version
	pulls    []docker.PullOptions
	calls    map[string]int            // engine calls per method
	archives map[string][]docker.Image // loadable archives by content
	history  []docker.ImageEvent
	subs     map[*subscriber]bool

	containers   map[string]*fakeContainer // by ID
	containerSeq int                       // containers ever created: IDs and addresses
	pidSeq       int                       // container starts: fake pids
	execHandler  func(id string, opts docker.ExecOptions) (int, error)
	changed      chan struct{} // closed and replaced whenever a container or its log changes

	attachHandler func(id string, opts docker.AttachOptions) error // set by SetAttachHandler (containers.go)
	replyHooks    map[string]func(context.Context) error           // by method, set by SetReplyHook (hooks.go)
	active        map[string]int                                   // calls under way per method (Active)
	logRequests   map[string][]docker.LogsOptions                  // ContainerLogs calls per container reference
	logChunk      int                                              // SetLogChunkSize
	sinceIgnored  bool                                             // SetLogSinceIgnored
}

// subscriber is one open event stream.
type subscriber struct {
	events chan docker.ImageEvent
	errs   chan error
}

var _ docker.Client = (*Fake)(nil)

// New returns an empty running engine (classic store, API 1.51).
func New() *Fake {
	return &Fake{
		images:   map[string]*docker.Image{},
		registry: map[string]docker.Image{},
		errs:     map[string]error{},
		calls:    map[string]int{},
		archives: map[string][]docker.Image{},
		subs:     map[*subscriber]bool{},
		info: docker.Info{
			Driver: "overlay2", DockerRootDir: "/var/lib/docker", CgroupDriver: "systemd",
			Runtimes: []string{"io.containerd.runc.v2", "runc"}, DefaultRuntime: "runc",
		},
		version: docker.Version{Version: "29.8.1", APIVersion: "1.51", NegotiatedAPIVersion: "1.51"},

		containers:  map[string]*fakeContainer{},
		changed:     make(chan struct{}),
		active:      map[string]int{},
		logRequests: map[string][]docker.LogsOptions{},
	}
}

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

// Calls returns how many times method reached the engine.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// BreakEvents ends every open event stream with err, as an engine restart does.
func (f *Fake) BreakEvents(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakStreams(err)
}

func (f *Fake) breakStreams(err error) {
	for sub := range f.subs {
		sub.errs <- err
		delete(f.subs, sub)
	}
}

// publish records an event and sends it to every stream. Caller holds mu.
func (f *Fake) publish(action, id, name string) {
	ev := docker.ImageEvent{Action: action, ID: id, Name: name, Time: time.Now()}
	f.history = append(f.history, ev)
	for sub := range f.subs {
		select {
		case sub.events <- ev:
		default: // a consumer that cannot keep up loses its stream, as with the engine
			sub.errs <- fmt.Errorf("event stream overflow: %w", cerrdefs.ErrUnavailable)
			delete(f.subs, sub)
		}
	}
}

// ImageEvents implements docker.Client: events since since are replayed first.
func (f *Fake) ImageEvents(ctx context.Context, since time.Time) (<-chan docker.ImageEvent, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &subscriber{events: make(chan docker.ImageEvent, 4096), errs: make(chan error, 1)}
	if err := f.check(ctx, "ImageEvents"); err != nil {
		sub.errs <- err
		return sub.events, sub.errs
	}
	for _, ev := range f.history {
		if !ev.Time.Before(since) {
			sub.events <- ev
		}
	}
	f.subs[sub] = true
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.subs[sub] {
			delete(f.subs, sub)
			sub.errs <- ctx.Err()
		}
	}()
	return sub.events, sub.errs
}

// AddRemote makes ref pullable; the pulled image is img, tagged ref.
func (f *Fake) AddRemote(ref string, img docker.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registry[normalise(ref)] = img
}

// SetDown makes every call fail as if the engine socket were gone.
func (f *Fake) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		f.breakStreams(fmt.Errorf("engine went away: %w", cerrdefs.ErrUnavailable))
	}
}

// SetInfo replaces what Info returns.
func (f *Fake) SetInfo(info docker.Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = info
}

// InjectError makes method (e.g. "ListImages") fail with err until cleared with nil.
// It panics when method is not a method of docker.Client, so that a misspelt name
// fails the test instead of injecting nothing.
func (f *Fake) InjectError(method string, err error) {
	if !clientMethods()[method] {
		panic(fmt.Sprintf("dockertest: InjectError(%q): docker.Client has no such method", method))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// clientMethods is the method set of docker.Client, for checking method names.
var clientMethods = sync.OnceValue(func() map[string]bool {
	t := reflect.TypeFor[docker.Client]()
	names := make(map[string]bool, t.NumMethod())
	for i := range t.NumMethod() {
		names[t.Method(i).Name] = true
	}
	return names
})

// Pulls returns the options of every pull so far.
func (f *Fake) Pulls() []docker.PullOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pulls)
}

// check counts a call and returns the error method should fail with: the context's,
// the engine being down, or one injected for method.
func (f *Fake) check(ctx context.Context, method string) error {
	f.calls[method]++
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.down {
		return fmt.Errorf("%s: cannot connect to the docker daemon: %w", method, cerrdefs.ErrUnavailable)
	}
	return f.errs[method]
}

// Ping implements docker.Client.
func (f *Fake) Ping(ctx context.Context) (err error) {
	defer f.replied(ctx, "Ping", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check(ctx, "Ping")
}

// Version implements docker.Client.
func (f *Fake) Version(ctx context.Context) (docker.Version, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, f.check(ctx, "Version")
}

// Info implements docker.Client.
func (f *Fake) Info(ctx context.Context) (docker.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info, f.check(ctx, "Info")
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
	remote, ok := f.registry[normalise(ref)]
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
func (f *Fake) RemoveImage(ctx context.Context, ref string) error {
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
	var used uint64
	for _, img := range f.images {
		used += uint64(img.Size)
	}
	return docker.ImageFsUsage{Mountpoint: f.info.DockerRootDir, UsedBytes: used}, nil
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

// normalise is the reference the engine resolves ref to; ref itself when it does not parse.
func normalise(ref string) string {
	if r, ok := imageref.Resolved(ref); ok {
		return r
	}
	return ref
}

// familiar is the short form the engine shows for ref; ref itself when it does not parse.
func familiar(ref string) string {
	r, err := imageref.Parse(ref)
	if err != nil {
		return ref
	}
	return r.Defaulted().Familiar()
}
