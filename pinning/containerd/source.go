package containerd

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
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// containerdNamespaceHeader is the gRPC metadata key that selects a containerd namespace.
const containerdNamespaceHeader = "containerd-namespace"

// Config configures the containerd record-label source.
type Config struct {
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

// Source pins images whose record in the engine's containerd image store
// carries PinnedLabel=PinnedValue. One Snapshot is one filtered List call.
type Source struct {
	cfg    Config
	conn   *grpc.ClientConn
	images imagesapi.ImagesClient
	log    logrus.FieldLogger
	warns  *pin.WarnLimiter

	pulls        keyedMutex    // serialises our pulls of one record, KeepPin to restore
	restoreRetry time.Duration // the first pause between pin restore tries (restoreFirstRetry)

	mu           sync.Mutex
	lastRecords  int                 // pinned records in the last good snapshot
	lastDangling int                 // dangling records ignored in it
	pinnedNames  map[string]struct{} // the records pinned in the last good (or restored) snapshot
	restores     restoreStats
}

var _ pin.Source = (*Source)(nil)

// NewSource prepares a client for cfg; it connects on first use.
func NewSource(cfg Config, log logrus.FieldLogger) (*Source, error) {
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
	return &Source{
		cfg: cfg, conn: conn, images: imagesapi.NewImagesClient(conn), log: log,
		warns: pin.NewWarnLimiter(cfg.WarnInterval, pin.MaxWarnedImages), restoreRetry: restoreFirstRetry,
	}, nil
}

// Close releases the connection.
func (s *Source) Close() error { return s.conn.Close() }

// Name implements Source.
func (s *Source) Name() string { return pin.SourceContainerd }

func (s *Source) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	return metadata.AppendToOutgoingContext(ctx, containerdNamespaceHeader, s.cfg.Namespace), cancel
}

// Snapshot lists the records that carry the pin label or its misspelling (one call)
// and returns the set of pinned target digests.
func (s *Source) Snapshot(ctx context.Context) (pin.Matcher, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.images.List(ctx, &imagesapi.ListImagesRequest{Filters: []string{
		// Filters are OR'ed; a field path alone tests presence.
		fmt.Sprintf("labels.%q", pin.PinnedLabel), fmt.Sprintf("labels.%q", pin.MisspelledLabel),
	}})
	if err != nil {
		return nil, fmt.Errorf("list pinned records in containerd namespace %s at %s: %w", s.cfg.Namespace, s.cfg.Address, err)
	}
	m := RecordMatcher{}
	dangling := 0
	now := time.Now()
	for _, rec := range resp.GetImages() {
		if !pin.HasPinnedLabel(rec.GetLabels()) {
			s.warnNearMiss(rec, now)
			continue
		}
		if !pin.RecordPinsByLabel(rec.GetName(), rec.GetLabels(), s.cfg.IncludeDangling) {
			if !pin.IsPreloadMirror(rec.GetLabels()) {
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
func (s *Source) EncodeSnapshot(m pin.Matcher) ([]byte, error) {
	rm, ok := m.(RecordMatcher)
	if !ok {
		return nil, fmt.Errorf("containerd pin source: cannot encode a %T snapshot", m)
	}
	return json.Marshal(map[string][]string(rm)) // map keys are sorted: equal snapshots encode equal
}

// DecodeSnapshot implements SnapshotCodec. The decoded records also stand for the
// record labels KeepPin cannot read while containerd is down.
func (s *Source) DecodeSnapshot(b []byte) (pin.Matcher, error) {
	var rm RecordMatcher
	if err := json.Unmarshal(b, &rm); err != nil {
		return nil, fmt.Errorf("containerd pin source: saved snapshot: %w", err)
	}
	if rm == nil {
		rm = RecordMatcher{}
	}
	s.mu.Lock()
	if s.pinnedNames == nil {
		s.pinnedNames = rm.names()
	}
	s.mu.Unlock()
	return rm, nil
}

func countRecords(m RecordMatcher) int {
	n := 0
	for _, names := range m {
		n += len(names)
	}
	return n
}

// warnNearMiss logs, at most once per record per WarnInterval, why a record that
// looks pinned is not.
func (s *Source) warnNearMiss(rec *imagesapi.Image, now time.Time) {
	if !s.warns.Allow(rec.GetName(), now) {
		return
	}
	for _, nm := range pin.NearMisses(rec.GetLabels()) {
		s.log.WithField("record", rec.GetName()).WithField("namespace", s.cfg.Namespace).
			WithField("label", nm.Label+"="+nm.Value).Warn("containerd image record is not pinned: " + nm.Why)
	}
}

// SourceStatus implements StatusReporter.
func (s *Source) SourceStatus() map[string]any {
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

// RecordMatcher is the Matcher of a snapshot of record labels: it maps a target digest (the engine's image ID) to the pinned records naming it.
type RecordMatcher map[string][]string

// names returns the set of pinned record names.
func (m RecordMatcher) names() map[string]struct{} {
	out := make(map[string]struct{}, len(m))
	for _, names := range m {
		for _, n := range names {
			out[n] = struct{}{}
		}
	}
	return out
}

// Match implements pin.Matcher: a record pins the image its target names.
func (m RecordMatcher) Match(img *pin.Image) []pin.Reason {
	names := m[img.ID]
	if len(names) == 0 {
		return nil
	}
	names = slices.Sorted(slices.Values(names))
	detail := "record " + names[0]
	if len(names) > 1 {
		detail += fmt.Sprintf(" (+%d more)", len(names)-1)
	}
	return []pin.Reason{{Source: pin.SourceContainerd, Detail: detail}}
}
