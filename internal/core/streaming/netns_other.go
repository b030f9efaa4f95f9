//go:build !linux

package streaming

import (
	"context"
	"fmt"
	"net"

	cerrdefs "github.com/containerd/errdefs"
)

// dialInNetns needs Linux network namespaces.
func dialInNetns(context.Context, string, int32) (net.Conn, error) {
	return nil, fmt.Errorf("port-forward: %w on this platform", cerrdefs.ErrNotImplemented)
}
