package pin

import (
	"context"
	"errors"
)

// Source is a pluggable provider of pins whose state lives outside the image list
// (containerd record labels, preloaded images). Snapshot is called at most once per
// Evaluate call (so a source can make ONE remote call per ListImages); it must honour ctx.
type Source interface {
	// Name identifies the source in logs and Info.
	Name() string
	// Snapshot captures the source's current pins.
	Snapshot(ctx context.Context) (Matcher, error)
}

// Matcher answers for one image from a snapshot; must be safe for concurrent use.
type Matcher interface {
	// Match returns the reasons the snapshot pins img; nil when it does not.
	Match(img *Image) []Reason
}

// StatusReporter is optionally implemented by a Source to add its own state to Info().
type StatusReporter interface {
	// SourceStatus returns JSON-serialisable state of the source.
	SourceStatus() map[string]any
}

// NoMatches is the Matcher of a snapshot that pins nothing.
type NoMatches struct{}

// Match implements Matcher: it pins nothing.
func (NoMatches) Match(*Image) []Reason { return nil }

// SnapshotCodec is implemented by a Source whose snapshots can be saved, so that its
// last good state outlives the process (Config.StateDir) and answers for it while it
// cannot, after a restart or a reboot too.
type SnapshotCodec interface {
	// EncodeSnapshot returns m, a snapshot this source took, as JSON.
	EncodeSnapshot(m Matcher) ([]byte, error)
	// DecodeSnapshot turns what EncodeSnapshot returned back into a snapshot.
	DecodeSnapshot(b []byte) (Matcher, error)
}

// ErrNoPinState is wrapped by Evaluate's error when a source cannot answer and has no
// usable last good state: listing images then would show its pinned images unpinned.
var ErrNoPinState = errors.New("pin source has no usable state")

// Disabled is a Source that pins nothing and makes no calls; it lets Info say that a
// source is off and why.
func Disabled(name, reason string) Source { return disabledSource{name: name, reason: reason} }

type disabledSource struct{ name, reason string }

func (d disabledSource) Name() string                              { return d.name }
func (d disabledSource) Snapshot(context.Context) (Matcher, error) { return NoMatches{}, nil }
func (d disabledSource) SourceStatus() map[string]any {
	return map[string]any{"enabled": false, "reason": d.reason}
}
