package network

import (
	"errors"

	cerrdefs "github.com/containerd/errdefs"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/dockpin/cri-dockerd/internal/errkind"
)

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
	if kind := errkind.Context(err); kind != nil {
		return errkind.New(kind, op, err)
	}
	var cniErr *cnitypes.Error
	if !errors.As(err, &cniErr) {
		return errkind.New(cerrdefs.ErrUnknown, op, err)
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
	return errkind.New(kind, op, err)
}
