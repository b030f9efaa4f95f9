package pinning

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/dockpin/cri-dockerd/imageref"
	"github.com/dockpin/cri-dockerd/logctx"
)

// DanglingPrefix names the records the engine keeps for untagged images.
const DanglingPrefix = "moby-dangling@"

// containerdNamespaceHeader is the gRPC metadata key that selects a containerd namespace.
const containerdNamespaceHeader = "containerd-namespace"

// ContainerdConfig configures the containerd record-label source.
type ContainerdConfig struct {
	// Address is containerd's socket path (or unix:// URL).
	Address string
	// Namespace is the engine's containerd namespace ("moby").
	Namespace string
	// IncludeDangling lets moby-dangling@ records pin their image.
	IncludeDangling bool
	// Timeout bounds each call to containerd (default 2s).
	Timeout time.Duration
	// WarnInterval rate-limits near-miss warnings per record (default 10m).
	WarnInterval time.Duration
}

// ContainerdSource pins images whose record in the engine's containerd image store
// carries PinnedLabel=PinnedValue. One Snapshot is one filtered List call.
type ContainerdSource struct {
	cfg    ContainerdConfig
	conn   *grpc.ClientConn
	images imagesapi.ImagesClient
	log    logrus.FieldLogger
	warns  *warnLimiter

	mu           sync.Mutex
	lastRecords  int // pinned records in the last good snapshot
	lastDangling int // dangling records ignored in it
}

var _ Source = (*ContainerdSource)(nil)

// NewContainerdSource prepares a client for cfg; it connects on first use.
func NewContainerdSource(cfg ContainerdConfig, log logrus.FieldLogger) (*ContainerdSource, error) {
	if cfg.Address == "" || cfg.Namespace == "" {
		return nil, errors.New("containerd pin source needs an address and a namespace")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.WarnInterval <= 0 {
		cfg.WarnInterval = 10 * time.Minute
	}
	target := cfg.Address
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Reconnect quickly after containerd comes back: the pin set should recover within seconds.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}, MinConnectTimeout: cfg.Timeout}),
	)
	if err != nil {
		return nil, fmt.Errorf("containerd client for %s: %w", cfg.Address, err)
	}
	return &ContainerdSource{
		cfg: cfg, conn: conn, images: imagesapi.NewImagesClient(conn), log: log,
		warns: newWarnLimiter(cfg.WarnInterval, maxWarnedImages),
	}, nil
}

// Close releases the connection.
func (s *ContainerdSource) Close() error { return s.conn.Close() }

// Name implements Source.
func (s *ContainerdSource) Name() string { return SourceContainerd }

func (s *ContainerdSource) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	return metadata.AppendToOutgoingContext(ctx, containerdNamespaceHeader, s.cfg.Namespace), cancel
}

// Snapshot lists the records that carry the pin label or its misspelling (one call)
// and returns the set of pinned target digests.
func (s *ContainerdSource) Snapshot(ctx context.Context) (Matcher, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.images.List(ctx, &imagesapi.ListImagesRequest{Filters: []string{
		// Filters are OR'ed; a field path alone tests presence.
		fmt.Sprintf("labels.%q", PinnedLabel), fmt.Sprintf("labels.%q", MisspelledLabel),
	}})
	if err != nil {
		return nil, fmt.Errorf("list pinned records in containerd namespace %s at %s: %w", s.cfg.Namespace, s.cfg.Address, err)
	}
	m := recordMatcher{}
	dangling := 0
	now := time.Now()
	for _, rec := range resp.GetImages() {
		if rec.GetLabels()[PinnedLabel] != PinnedValue {
			s.warnNearMiss(rec, now)
			continue
		}
		if strings.HasPrefix(rec.GetName(), DanglingPrefix) && !s.cfg.IncludeDangling {
			dangling++
			continue
		}
		d := rec.GetTarget().GetDigest()
		m[d] = append(m[d], rec.GetName())
	}
	s.mu.Lock()
	s.lastRecords, s.lastDangling = countRecords(m), dangling
	s.mu.Unlock()
	return m, nil
}

func countRecords(m recordMatcher) int {
	n := 0
	for _, names := range m {
		n += len(names)
	}
	return n
}

// warnNearMiss logs, at most once per record per WarnInterval, why a record that
// looks pinned is not.
func (s *ContainerdSource) warnNearMiss(rec *imagesapi.Image, now time.Time) {
	if !s.warns.allow(rec.GetName(), now) {
		return
	}
	for _, nm := range nearMisses(rec.GetLabels()) {
		s.log.WithField("record", rec.GetName()).WithField("namespace", s.cfg.Namespace).
			WithField("label", nm.label+"="+nm.value).Warn("containerd image record is not pinned: " + nm.why)
	}
}

// SourceStatus implements StatusReporter.
func (s *ContainerdSource) SourceStatus() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{
		"enabled":         true,
		"address":         s.cfg.Address,
		"namespace":       s.cfg.Namespace,
		"includeDangling": s.cfg.IncludeDangling,
		"pinnedRecords":   s.lastRecords,
		"ignoredDangling": s.lastDangling,
	}
}

// recordMatcher maps a target digest (the engine's image ID) to the pinned records naming it.
type recordMatcher map[string][]string

func (m recordMatcher) Match(img *Image) []Reason {
	names := m[img.ID]
	if len(names) == 0 {
		return nil
	}
	names = slices.Sorted(slices.Values(names))
	detail := "record " + names[0]
	if len(names) > 1 {
		detail += fmt.Sprintf(" (+%d more)", len(names)-1)
	}
	return []Reason{{Source: SourceContainerd, Detail: detail}}
}

// KeepPin is called before the engine pulls ref, which replaces the labels of ref's
// record. If the record carries the pin now, the returned function (to call after a
// successful pull) puts back exactly that label with a field-path update.
func (s *ContainerdSource) KeepPin(ctx context.Context, ref string) func(context.Context) {
	name, ok := imageref.Resolved(ref) // the engine's record name for ref
	if !ok {
		return func(context.Context) {}
	}
	if rec := s.record(ctx, name); rec.GetLabels()[PinnedLabel] != PinnedValue {
		return func(context.Context) {}
	}
	return func(ctx context.Context) { s.restorePin(ctx, name) }
}

func (s *ContainerdSource) restorePin(ctx context.Context, name string) {
	rec := s.record(ctx, name)
	if rec == nil || rec.GetLabels()[PinnedLabel] == PinnedValue {
		return
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	// The update carries the record's current target: containerd requires one even when
	// the field mask names only a label (2.4 dereferences it).
	_, err := s.images.Update(cctx, &imagesapi.UpdateImageRequest{
		Image:      &imagesapi.Image{Name: name, Target: rec.GetTarget(), Labels: map[string]string{PinnedLabel: PinnedValue}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels." + PinnedLabel}},
	})
	log := logctx.For(ctx, s.log).WithField("record", name)
	if err != nil {
		log.WithError(err).Warn("the pull removed the pin label from the image record and it could not be put back")
		return
	}
	log.Info("put back the pin label that the pull removed from the image record")
}

// record returns the record called name, or nil when there is none or it cannot be read.
func (s *ContainerdSource) record(ctx context.Context, name string) *imagesapi.Image {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.images.Get(cctx, &imagesapi.GetImageRequest{Name: name})
	if err != nil {
		if status.Code(err) != codes.NotFound {
			logctx.For(ctx, s.log).WithError(err).WithField("record", name).Warn("cannot read the image record to keep its pin across the pull")
		}
		return nil
	}
	return resp.GetImage()
}

// Disabled is a Source that pins nothing and makes no calls; it lets Info say that a
// source is off and why.
func Disabled(name, reason string) Source { return disabledSource{name: name, reason: reason} }

type disabledSource struct{ name, reason string }

func (d disabledSource) Name() string                              { return d.name }
func (d disabledSource) Snapshot(context.Context) (Matcher, error) { return noMatches{}, nil }
func (d disabledSource) SourceStatus() map[string]any {
	return map[string]any{"enabled": false, "reason": d.reason}
}
