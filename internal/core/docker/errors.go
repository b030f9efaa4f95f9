package docker

import (
	"context"
	"errors"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// kindError gives an SDK error exactly one errdefs kind and a message that starts
// with the operation, while keeping the SDK error reachable through errors.Is/As.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// classify converts an SDK error into an error with an errdefs kind. It is the
// only place where this package decides what an engine error means.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := op + ": " + err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &kindError{kind: contextKind(err), msg: msg, cause: err}
	case client.IsErrConnectionFailed(err), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return &kindError{kind: cerrdefs.ErrUnavailable, msg: msg, cause: err}
	}
	return &kindError{kind: kindOf(err), msg: msg, cause: err}
}

// classifyAs gives an SDK error whose meaning the operation fixes the kind kind,
// keeping the SDK error reachable. It replaces classify for that error.
func classifyAs(op string, err error, kind error) error {
	return &kindError{kind: kind, msg: op + ": " + err.Error(), cause: err}
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

func contextKind(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return context.Canceled
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
	msg := "pull " + ref + ": " + err.Error()
	if isRegistryNetworkFailure(err.Error()) {
		return &kindError{kind: cerrdefs.ErrUnavailable, msg: msg, cause: errors.Join(ErrRegistryUnreachable, err)}
	}
	return classify("pull "+ref, err)
}
