package docker

import (
	"context"
	"errors"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
	"github.com/dockpin/cri-dockerd/internal/errkind"
)

// classify converts an SDK error into an error with an errdefs kind. It is the
// only place where this package decides what an engine error means.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if kind := errkind.Context(err); kind != nil {
		return errkind.New(kind, op, err)
	}
	if client.IsErrConnectionFailed(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return errkind.New(cerrdefs.ErrUnavailable, op, err)
	}
	return errkind.New(kindOf(err), op, err)
}

// classifyAs gives an SDK error whose meaning the operation fixes the kind kind,
// keeping the SDK error reachable. It replaces classify for that error.
func classifyAs(op string, err error, kind error) error {
	return errkind.New(kind, op, err)
}

// kinds are tested in order by kindOf. The Is* functions recognise both wrapped errdefs
// errors and the SDK's HTTP status errors (which carry their kind as a method, and which
// errdefs.Resolve does not see).
var kinds = []struct {
	is   func(error) bool
	kind error
}{
	{cerrdefs.IsNotFound, cerrdefs.ErrNotFound},
	{cerrdefs.IsInvalidArgument, cerrdefs.ErrInvalidArgument},
	{cerrdefs.IsConflict, cerrdefs.ErrConflict},
	{cerrdefs.IsAlreadyExists, cerrdefs.ErrAlreadyExists},
	{cerrdefs.IsUnauthorized, cerrdefs.ErrUnauthenticated},
	{cerrdefs.IsPermissionDenied, cerrdefs.ErrPermissionDenied},
	{cerrdefs.IsUnavailable, cerrdefs.ErrUnavailable},
	{cerrdefs.IsNotImplemented, cerrdefs.ErrNotImplemented},
	{cerrdefs.IsFailedPrecondition, cerrdefs.ErrFailedPrecondition},
	{cerrdefs.IsResourceExhausted, cerrdefs.ErrResourceExhausted},
	{cerrdefs.IsNotModified, cerrdefs.ErrNotModified},
	{cerrdefs.IsDataLoss, cerrdefs.ErrDataLoss},
	{cerrdefs.IsInternal, cerrdefs.ErrInternal},
}

// kindOf returns err's errdefs kind, ErrUnknown when it has none.
func kindOf(err error) error {
	for _, k := range kinds {
		if k.is(err) {
			return k.kind
		}
	}
	return cerrdefs.ErrUnknown
}

// registryNetworkSignatures are the texts the engine puts in a pull error when it
// could not reach the registry. The engine reports pull failures in the progress
// stream as plain text only, so this is the one place where a message is read.
var registryNetworkSignatures = []string{
	"dial tcp", "connection refused", "no such host", "i/o timeout",
	"network is unreachable", "TLS handshake timeout", "connection reset by peer",
	"no route to host", "server misbehaving",
}

func isRegistryNetworkFailure(msg string) bool {
	for _, s := range registryNetworkSignatures {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// pullError classifies a pull failure: registry unreachable, not found, denied, or
// whatever kind the engine gave.
func pullError(ref string, err error) error {
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return classify("pull "+ref, err)
	}
	if isRegistryNetworkFailure(err.Error()) {
		return errkind.WithMessage(cerrdefs.ErrUnavailable, "pull "+ref+": "+err.Error(), errors.Join(ErrRegistryUnreachable, err))
	}
	return classify("pull "+ref, err)
}
