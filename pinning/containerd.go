package pinning

import (
	"context"
	"encoding/json"
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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
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

	pulls        keyedMutex    // serialises our pulls of one record, KeepPin to restore
	restoreRetry time.Duration // the first pause between pin restore tries (restoreFirstRetry)

	mu           sync.Mutex
	lastRecords  int                 // pinned records in the last good snapshot
	lastDangling int                 // dangling records ignored in it
	pinnedNames  map[string]struct{} // the records pinned in the last good (or restored) snapshot
	restores     restoreStats
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
		warns: newWarnLimiter(cfg.WarnInterval, maxWarnedImages), restoreRetry: restoreFirstRetry,
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
		if !hasPinnedLabel(rec.GetLabels()) {
			s.warnNearMiss(rec, now)
			continue
		}
		if !recordPinsByLabel(rec.GetName(), rec.GetLabels(), s.cfg.IncludeDangling) {
			if !isPreloadMirror(rec.GetLabels()) {
				dangling++
			}
			continue
		}
		d := rec.GetTarget().GetDigest()
		m[d] = append(m[d], rec.GetName())
	}
	s.mu.Lock()
	s.lastRecords, s.lastDangling, s.pinnedNames = countRecords(m), dangling, m.names()
	s.mu.Unlock()
	return m, nil
}

// EncodeSnapshot implements SnapshotCodec: the pinned record names by target digest.
func (s *ContainerdSource) EncodeSnapshot(m Matcher) ([]byte, error) {
	rm, ok := m.(recordMatcher)
	if !ok {
		return nil, fmt.Errorf("containerd pin source: cannot encode a %T snapshot", m)
	}
	return json.Marshal(map[string][]string(rm)) // map keys are sorted: equal snapshots encode equal
}

// DecodeSnapshot implements SnapshotCodec. The decoded records also stand for the
// record labels KeepPin cannot read while containerd is down.
func (s *ContainerdSource) DecodeSnapshot(b []byte) (Matcher, error) {
	var rm recordMatcher
	if err := json.Unmarshal(b, &rm); err != nil {
		return nil, fmt.Errorf("containerd pin source: saved snapshot: %w", err)
	}
	if rm == nil {
		rm = recordMatcher{}
	}
	s.mu.Lock()
	if s.pinnedNames == nil {
		s.pinnedNames = rm.names()
	}
	s.mu.Unlock()
	return rm, nil
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
		"pinRestores":     s.restores.info(),
	}
}

// recordMatcher maps a target digest (the engine's image ID) to the pinned records naming it.
type recordMatcher map[string][]string

// names returns the set of pinned record names.
func (m recordMatcher) names() map[string]struct{} {
	out := make(map[string]struct{}, len(m))
	for _, names := range m {
		for _, n := range names {
			out[n] = struct{}{}
		}
	}
	return out
}

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

// Disabled is a Source that pins nothing and makes no calls; it lets Info say that a
// source is off and why.
func Disabled(name, reason string) Source { return disabledSource{name: name, reason: reason} }

type disabledSource struct{ name, reason string }

func (d disabledSource) Name() string                              { return d.name }
func (d disabledSource) Snapshot(context.Context) (Matcher, error) { return noMatches{}, nil }
func (d disabledSource) SourceStatus() map[string]any {
	return map[string]any{"enabled": false, "reason": d.reason}
}
