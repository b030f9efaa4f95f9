package streaming

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// Defaults of Config.
const (
	// DefaultIdleTimeout is how long an idle stream connection stays open (kubelet's
	// and upstream's default).
	DefaultIdleTimeout = 4 * time.Hour
	// DefaultCreationTimeout is how long a client may take to open its streams after
	// the upgrade (the kubelet streaming library's default).
	DefaultCreationTimeout = 30 * time.Second
)

// Config is the streaming part of the command line.
type Config struct {
	// Addr is --streaming-bind-addr: an IP address (the port is then chosen at
	// random) or an IP:port ("[IPv6]:port"), as upstream parses it. "" means
	// 127.0.0.1 with a random port. Upstream binds all addresses when it is empty;
	// kubelet, which proxies every stream, runs on the same node, so loopback is
	// enough and keeps the unauthenticated exec endpoint off the network (containerd's
	// default is loopback as well).
	Addr string
	// IdleTimeout closes a stream connection after this long without traffic
	// (0 = DefaultIdleTimeout).
	IdleTimeout time.Duration
	// CreationTimeout bounds how long a SPDY client may take to open its streams
	// after the upgrade (0 = DefaultCreationTimeout).
	CreationTimeout time.Duration
}

// DefaultConfig returns the defaults: loopback with a random port.
func DefaultConfig() Config {
	return Config{IdleTimeout: DefaultIdleTimeout, CreationTimeout: DefaultCreationTimeout}
}

// Validate checks the values a user can get wrong. Errors wrap ErrInvalidArgument.
func (c Config) Validate() error {
	if _, err := c.listenAddr(); err != nil {
		return err
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("streaming idle timeout %s is negative: %w", c.IdleTimeout, cerrdefs.ErrInvalidArgument)
	}
	if c.CreationTimeout < 0 {
		return fmt.Errorf("stream creation timeout %s is negative: %w", c.CreationTimeout, cerrdefs.ErrInvalidArgument)
	}
	return nil
}

// listenAddr returns the host:port to listen on for Addr.
func (c Config) listenAddr() (string, error) {
	if c.Addr == "" {
		return "127.0.0.1:0", nil
	}
	if ap, err := netip.ParseAddrPort(c.Addr); err == nil {
		if ap.Addr().Zone() != "" {
			return "", fmt.Errorf("streaming bind address %q: zones are not supported: %w", c.Addr, cerrdefs.ErrInvalidArgument)
		}
		return ap.String(), nil
	}
	a, err := netip.ParseAddr(c.Addr)
	if err != nil || a.Zone() != "" {
		return "", fmt.Errorf("streaming bind address %q is neither an IP address nor IP:port: %w", c.Addr, cerrdefs.ErrInvalidArgument)
	}
	return net.JoinHostPort(a.String(), "0"), nil
}

func (c Config) idleTimeout() time.Duration {
	if c.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return c.IdleTimeout
}

func (c Config) creationTimeout() time.Duration {
	if c.CreationTimeout == 0 {
		return DefaultCreationTimeout
	}
	return c.CreationTimeout
}
