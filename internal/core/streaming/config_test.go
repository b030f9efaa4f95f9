package streaming

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    string // listen address
		wantErr bool
	}{
		{name: "default", cfg: DefaultConfig(), want: "127.0.0.1:0"},
		{name: "zero value", cfg: Config{}, want: "127.0.0.1:0"},
		{name: "ip only", cfg: Config{Addr: "10.1.2.3"}, want: "10.1.2.3:0"},
		{name: "ip and port", cfg: Config{Addr: "127.0.0.1:10010"}, want: "127.0.0.1:10010"},
		{name: "all addresses", cfg: Config{Addr: "0.0.0.0"}, want: "0.0.0.0:0"},
		{name: "ipv6", cfg: Config{Addr: "::1"}, want: "[::1]:0"},
		{name: "ipv6 and port", cfg: Config{Addr: "[::1]:10010"}, want: "[::1]:10010"},
		{name: "host name", cfg: Config{Addr: "localhost"}, wantErr: true},
		{name: "host name and port", cfg: Config{Addr: "localhost:10010"}, wantErr: true},
		{name: "port only", cfg: Config{Addr: ":10010"}, wantErr: true},
		{name: "bad port", cfg: Config{Addr: "127.0.0.1:99999"}, wantErr: true},
		{name: "zone", cfg: Config{Addr: "fe80::1%eth0"}, wantErr: true},
		{name: "negative idle timeout", cfg: Config{IdleTimeout: -time.Second}, wantErr: true},
		{name: "negative creation timeout", cfg: Config{CreationTimeout: -time.Second}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr {
				assert.Assert(t, errors.Is(err, cerrdefs.ErrInvalidArgument), "got %v", err)
				return
			}
			assert.NilError(t, err)
			got, err := tc.cfg.listenAddr()
			assert.NilError(t, err)
			assert.Check(t, is.Equal(got, tc.want))
		})
	}
}

func TestNewListensOnLoopbackByDefault(t *testing.T) {
	s, err := New(Config{}, newEngine(t), testLogger(t))
	assert.NilError(t, err)
	t.Cleanup(func() { assert.NilError(t, s.Close()) })
	host, port, err := net.SplitHostPort(s.Addr())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(host, "127.0.0.1"))
	assert.Check(t, port != "0")

	_, err = New(Config{Addr: "localhost"}, newEngine(t), testLogger(t))
	assert.Assert(t, errors.Is(err, cerrdefs.ErrInvalidArgument), "got %v", err)
	// A taken port fails at New, not later at Serve.
	_, err = New(Config{Addr: s.Addr()}, newEngine(t), testLogger(t))
	assert.ErrorContains(t, err, "listen on "+s.Addr())
}

func TestAdvertised(t *testing.T) {
	tests := []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5}, "127.0.0.1:5"},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 5}, "10.0.0.7:5"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 5}, "127.0.0.1:5"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 5}, "[::1]:5"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 5}, "[::1]:5"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.addr.String(), ":", "_"), func(t *testing.T) {
			assert.Equal(t, advertised(tc.addr), tc.want)
		})
	}
}
