package network

import (
	"context"
	"errors"

	cerrdefs "github.com/containerd/errdefs"
	cnitypes "github.com/containernetworking/cni/pkg/types"
)

// kindError gives an error exactly one errdefs kind and a message that starts with the
// operation, while keeping the cause (e.g. the plugin's *types.Error) reachable.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// classify turns an error from libcni or a plugin into one with an errdefs kind:
// the context's own error when the deadline passed or the request was cancelled;
// for a plugin's CNI error code: Unavailable (try again later, plugin not available),
// FailedPrecondition (the node's network configuration or plugins are wrong),
// InvalidArgument (bad network namespace), NotFound (unknown container); Unknown for
// anything else. The message keeps the plugin's text.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := op + ": " + err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &kindError{kind: context.DeadlineExceeded, msg: msg, cause: err}
	case errors.Is(err, context.Canceled):
		return &kindError{kind: context.Canceled, msg: msg, cause: err}
	}
	var cniErr *cnitypes.Error
	if !errors.As(err, &cniErr) {
		return &kindError{kind: cerrdefs.ErrUnknown, msg: msg, cause: err}
	}
	var kind error = cerrdefs.ErrUnknown
	switch cniErr.Code {
	case cnitypes.ErrTryAgainLater, cnitypes.ErrPluginNotAvailable:
		kind = cerrdefs.ErrUnavailable
	case cnitypes.ErrIncompatibleCNIVersion, cnitypes.ErrUnsupportedField,
		cnitypes.ErrInvalidEnvironmentVariables, cnitypes.ErrDecodingFailure,
		cnitypes.ErrInvalidNetworkConfig:
		kind = cerrdefs.ErrFailedPrecondition
	case cnitypes.ErrInvalidNetNS:
		kind = cerrdefs.ErrInvalidArgument
	case cnitypes.ErrUnknownContainer:
		kind = cerrdefs.ErrNotFound
	}
	return &kindError{kind: kind, msg: msg, cause: err}
}
