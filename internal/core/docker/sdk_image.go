package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
)

// ListImages lists all top-level images.
func (c *SDKClient) ListImages(ctx context.Context) ([]Image, error) {
	list, err := c.api.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, classify("list images", err)
	}
	out := make([]Image, 0, len(list))
	for i := range list {
		s := &list[i]
		out = append(out, Image{
			ID:          s.ID,
			RepoTags:    realRefs(s.RepoTags),
			RepoDigests: realRefs(s.RepoDigests),
			Size:        s.Size,
			Labels:      s.Labels,
		})
	}
	return out, nil
}

// InspectImage resolves ref to an image.
func (c *SDKClient) InspectImage(ctx context.Context, ref string) (Image, error) {
	in, err := c.api.ImageInspect(ctx, ref)
	if err != nil {
		return Image{}, classify("inspect image "+ref, err)
	}
	img := Image{
		ID:          in.ID,
		RepoTags:    realRefs(in.RepoTags),
		RepoDigests: realRefs(in.RepoDigests),
		Size:        in.Size,
	}
	if in.Config != nil {
		img.Labels = in.Config.Labels
		img.User = in.Config.User
	}
	return img, nil
}

// PullImage pulls ref, reading the engine's progress stream to its end.
func (c *SDKClient) PullImage(ctx context.Context, ref string, opts PullOptions) error {
	pullOpts := image.PullOptions{}
	if opts.Auth != nil {
		enc, err := encodeAuth(*opts.Auth)
		if err != nil {
			return fmt.Errorf("pull %s: %w", ref, errors.Join(cerrdefs.ErrInvalidArgument, err))
		}
		pullOpts.RegistryAuth = enc
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Armed before the request: the engine answers nothing until it has progress to
	// report, so a registry that stalls while resolving the manifest counts too.
	watchdog := watchProgress(opts.ProgressDeadline, cancel)
	defer watchdog.stop()
	err := c.pull(ctx, ref, pullOpts, watchdog)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errNoProgress) {
		return fmt.Errorf("pull %s: %w", ref, errors.Join(context.DeadlineExceeded, cause))
	}
	return err
}

func (c *SDKClient) pull(ctx context.Context, ref string, opts image.PullOptions, watchdog *progressWatchdog) error {
	body, err := c.api.ImagePull(ctx, ref, opts)
	if err != nil {
		return pullError(ref, err)
	}
	defer body.Close()
	if err := readPullStream(ctx, body, watchdog.progress); err != nil {
		return pullError(ref, err)
	}
	return nil
}

// progressWatchdog cancels a pull that makes no progress for its deadline; a nil one
// never fires.
type progressWatchdog struct {
	timer    *time.Timer
	deadline time.Duration
}

func watchProgress(deadline time.Duration, cancel context.CancelCauseFunc) *progressWatchdog {
	if deadline <= 0 {
		return nil
	}
	return &progressWatchdog{
		timer:    time.AfterFunc(deadline, func() { cancel(fmt.Errorf("%w (%s)", errNoProgress, deadline)) }),
		deadline: deadline,
	}
}

// progress restarts the countdown.
func (w *progressWatchdog) progress() {
	if w != nil {
		w.timer.Reset(w.deadline)
	}
}

func (w *progressWatchdog) stop() {
	if w != nil {
		w.timer.Stop()
	}
}

// streamMessage is the part of one progress-stream message this client reads.
type streamMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// err is the error the message reports, if any.
func (m *streamMessage) err() error {
	if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
		return errors.New(m.ErrorDetail.Message)
	}
	if m.Error != "" {
		return errors.New(m.Error)
	}
	return nil
}

var errNoProgress = errors.New("no pull progress within the image pull progress deadline")

// readPullStream decodes the progress stream until EOF, calling onProgress for every
// message and returning the first error message the engine sent.
func readPullStream(ctx context.Context, body io.Reader, onProgress func()) error {
	dec := json.NewDecoder(body)
	for {
		var msg streamMessage
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		onProgress()
		if err := msg.err(); err != nil {
			return err
		}
	}
}

// LoadImages loads an image archive. The engine reports what it loaded only as text
// lines ("Loaded image: REF", "Loaded image ID: ID") in its stream.
func (c *SDKClient) LoadImages(ctx context.Context, archive io.Reader) ([]string, error) {
	resp, err := c.api.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return nil, classify("load images", err)
	}
	defer resp.Body.Close()
	var refs []string
	dec := json.NewDecoder(resp.Body)
	for {
		var msg streamMessage
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return refs, nil
			}
			return refs, classify("load images", err)
		}
		if err := msg.err(); err != nil {
			return refs, fmt.Errorf("load images: %w", errors.Join(cerrdefs.ErrInvalidArgument, err))
		}
		for _, line := range strings.Split(msg.Stream, "\n") {
			for _, prefix := range []string{"Loaded image: ", "Loaded image ID: "} {
				if ref, ok := strings.CutPrefix(line, prefix); ok {
					refs = append(refs, strings.TrimSpace(ref))
				}
			}
		}
	}
}

// RemoveImage removes the image ref resolves to and every reference to it: tags
// first, since the engine refuses to remove an ID that several repositories name.
func (c *SDKClient) RemoveImage(ctx context.Context, ref string) error {
	in, err := c.api.ImageInspect(ctx, ref)
	if err != nil {
		return classify("remove image "+ref, err)
	}
	for _, r := range append(append(realRefs(in.RepoTags), realRefs(in.RepoDigests)...), in.ID) {
		_, err := c.api.ImageRemove(ctx, r, image.RemoveOptions{PruneChildren: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return classify("remove image "+ref+" ("+r+")", err)
		}
	}
	return nil
}

// ImageFsUsage reports the space used by image layers and containers' writable layers,
// and the inodes in use on their filesystem.
func (c *SDKClient) ImageFsUsage(ctx context.Context) (ImageFsUsage, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return ImageFsUsage{}, err
	}
	du, err := c.api.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.ImageObject, types.ContainerObject}})
	if err != nil {
		return ImageFsUsage{}, classify("docker disk usage", err)
	}
	out := ImageFsUsage{Mountpoint: info.DockerRootDir, UsedBytes: nonNegative(du.LayersSize)}
	for _, ctr := range du.Containers {
		if ctr != nil {
			out.ContainersUsedBytes += nonNegative(ctr.SizeRw)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(info.DockerRootDir, &st); err == nil && st.Files >= st.Ffree {
		out.InodesUsed = st.Files - st.Ffree
	}
	return out, nil
}

func nonNegative(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// ImageEvents streams the engine's image events.
func (c *SDKClient) ImageEvents(ctx context.Context, since time.Time) (<-chan ImageEvent, <-chan error) {
	opts := events.ListOptions{Filters: filters.NewArgs(filters.Arg("type", string(events.ImageEventType))), Since: eventsSince(since)}
	return streamEvents(ctx, c, opts, func(m events.Message) ImageEvent {
		return ImageEvent{Action: string(m.Action), ID: m.Actor.ID, Name: m.Actor.Attributes["name"], Time: time.Unix(0, m.TimeNano)}
	})
}

func realRefs(refs []string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if r == "" || strings.HasPrefix(r, "<none>") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// encodeAuth turns CRI credentials into the engine's X-Registry-Auth header value.
func encodeAuth(a AuthConfig) (string, error) {
	user, pass := a.Username, a.Password
	if a.Auth != "" && user == "" && pass == "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", fmt.Errorf("auth field is not base64: %w", err)
		}
		u, p, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", errors.New("auth field is not base64 of user:password")
		}
		user, pass = u, p
	}
	return registry.EncodeAuthConfig(registry.AuthConfig{
		Username:      user,
		Password:      pass,
		ServerAddress: a.ServerAddress,
		IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken,
	})
}
