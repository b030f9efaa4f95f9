package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/coreos/go-systemd/v22/activation"
)

// endpoint is a parsed --container-runtime-endpoint.
type endpoint struct {
	scheme string // unix, tcp or fd
	addr   string // socket path or host:port; empty for fd
}

func parseEndpoint(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, fmt.Errorf("invalid endpoint %q: %w", s, err)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if p == "" {
			p = u.Host + u.Path
		}
		if p == "" {
			return endpoint{}, fmt.Errorf("endpoint %q has no socket path", s)
		}
		return endpoint{scheme: "unix", addr: p}, nil
	case "tcp":
		if u.Host == "" {
			return endpoint{}, fmt.Errorf("endpoint %q has no host:port", s)
		}
		return endpoint{scheme: "tcp", addr: u.Host}, nil
	case "fd":
		return endpoint{scheme: "fd"}, nil
	default:
		return endpoint{}, fmt.Errorf("endpoint %q: scheme must be unix, tcp or fd", s)
	}
}

// listen opens the listener for ep. A unix socket's stale file is replaced; fd://
// takes the first socket systemd passed (LISTEN_FDS).
func listen(ep endpoint) (net.Listener, error) {
	switch ep.scheme {
	case "unix":
		if err := os.MkdirAll(filepath.Dir(ep.addr), 0o755); err != nil {
			return nil, fmt.Errorf("create socket directory: %w", err)
		}
		if err := os.Remove(ep.addr); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", ep.addr, err)
		}
		return net.Listen("unix", ep.addr)
	case "tcp":
		return net.Listen("tcp", ep.addr)
	default:
		ls, err := activation.Listeners()
		if err != nil {
			return nil, fmt.Errorf("systemd socket activation: %w", err)
		}
		if len(ls) == 0 || ls[0] == nil {
			return nil, errors.New("fd:// endpoint but systemd passed no socket (LISTEN_FDS unset)")
		}
		return ls[0], nil
	}
}
