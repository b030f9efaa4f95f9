package app

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// TestUpstreamFlagDefaults pins every upstream flag name and default (upstream-facts.md):
// a drop-in binary must start under an existing systemd unit.
func TestUpstreamFlagDefaults(t *testing.T) {
	opts := DefaultOptions()
	fs := opts.flagSet()
	want := map[string]string{
		"container-runtime-endpoint":   "unix:///var/run/cri-dockerd.sock",
		"docker-endpoint":              "unix:///var/run/docker.sock",
		"cri-dockerd-root-directory":   "/var/lib/cri-dockerd",
		"pod-infra-container-image":    "registry.k8s.io/pause:3.10",
		"network-plugin":               "cni",
		"cni-bin-dir":                  "/opt/cni/bin",
		"cni-conf-dir":                 "/etc/cni/net.d",
		"cni-cache-dir":                "/var/lib/cni/cache",
		"network-plugin-mtu":           "0",
		"hairpin-mode":                 "none",
		"pod-cidr":                     "",
		"ipv6-dual-stack":              "false",
		"image-pull-progress-deadline": "1m0s",
		"runtime-request-timeout":      "0s",
		"streaming-bind-addr":          "",
		"runtime-cgroups":              "",
		"log-level":                    "info",
		"version":                      "false",
		"buildinfo":                    "false",
		"help":                         "false",
		"pinned-images":                "[]",
		"pinned-image-labels":          "[]",
		"pinned-images-file":           "",
		"pin-from-config-labels":       "true",
		"pin-from-containerd-labels":   "auto",
		"containerd-address":           "",
		"containerd-namespace":         "",
		"pin-dangling-records":         "false",
		"preserve-pin-on-pull":         "true",
		"pin-source-max-staleness":     "0s",
		"containerd-timeout":           "2s",
		"image-cache":                  "true",
		"image-cache-resync":           "5m0s",
		"preload-images-dir":           "",
		"pin-proxy-backend":            "",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if assert.Check(t, f != nil, "flag --%s missing", name) {
			assert.Check(t, is.Equal(f.DefValue, def), "--%s", name)
		}
	}
	assert.Equal(t, fs.ShorthandLookup("h").Name, "help")
	assert.Equal(t, opts.requestTimeout(), 2*time.Minute-time.Second)
}

func TestParseFlagsAndValidate(t *testing.T) {
	opts := DefaultOptions()
	fs := opts.flagSet()
	assert.NilError(t, fs.Parse([]string{
		"--network-plugin=", "--pinned-images", "a:1,b*", "--pinned-images", "*c*",
		"--pinned-image-labels=team=infra", "--runtime-request-timeout=30s",
	}))
	assert.NilError(t, opts.Validate())
	assert.DeepEqual(t, opts.PinnedImages, []string{"a:1", "b*", "*c*"})
	assert.Equal(t, opts.NetworkPlugin, "")
	assert.Equal(t, opts.requestTimeout(), 30*time.Second)
	assert.DeepEqual(t, opts.pinningConfig().Patterns, []string{"a:1", "b*", "*c*"})
}

func TestValidateNamesEveryProblem(t *testing.T) {
	opts := DefaultOptions()
	opts.RuntimeEndpoint = "npipe:////./pipe/x"
	opts.NetworkPlugin = "flannel"
	opts.HairpinMode = "sideways"
	opts.StreamingBindAddr = "not-an-address"
	opts.LogLevel = "loud"
	opts.PinnedImages = []string{"ok:1", "bad*pattern*here"}
	err := opts.Validate()
	for _, want := range []string{"--container-runtime-endpoint", "flannel", "sideways", "loud", "bad*pattern*here", "--streaming-bind-addr"} {
		assert.Check(t, is.ErrorContains(err, want))
	}
}

func TestValidatePinProxyBackend(t *testing.T) {
	tests := []struct {
		backend, own string
		wantErr      string
	}{
		{backend: ""},
		{backend: "unix:///run/cri-dockerd-backend.sock"},
		{backend: "tcp://127.0.0.1:7000"},
		{backend: "fd://", wantErr: "not fd://"},
		{backend: "npipe:///x", wantErr: "--pin-proxy-backend"},
		{backend: "unix:///var/run/cri-dockerd.sock", wantErr: "forward to itself"},
		{backend: "unix:///run/b.sock", own: "unix:///run/b.sock", wantErr: "forward to itself"},
	}
	for _, tc := range tests {
		t.Run(tc.backend, func(t *testing.T) {
			opts := DefaultOptions()
			opts.PinProxyBackend = tc.backend
			if tc.own != "" {
				opts.RuntimeEndpoint = tc.own
			}
			err := opts.Validate()
			if tc.wantErr == "" {
				assert.Check(t, is.Nil(err))
				return
			}
			assert.Check(t, is.ErrorContains(err, tc.wantErr))
		})
	}
}

func TestValidateMetricsAddress(t *testing.T) {
	tests := []struct {
		addr    string
		pprof   bool
		wantErr string
	}{
		{addr: ""},
		{addr: "127.0.0.1:9469", pprof: true},
		{addr: "[::1]:0"},
		{addr: "", pprof: true, wantErr: "--enable-pprof"},
		{addr: "127.0.0.1", wantErr: "--metrics-address"},
		{addr: "http://127.0.0.1:9469/metrics", wantErr: "--metrics-address"},
	}
	for _, tc := range tests {
		opts := DefaultOptions()
		opts.MetricsAddress, opts.EnablePprof = tc.addr, tc.pprof
		err := opts.Validate()
		if tc.wantErr == "" {
			assert.Check(t, is.Nil(err), "%+v", tc)
			continue
		}
		assert.Check(t, is.ErrorContains(err, tc.wantErr), "%+v", tc)
	}
}

func TestValidateRefusesKubenet(t *testing.T) {
	opts := DefaultOptions()
	opts.NetworkPlugin = "kubenet"
	assert.Check(t, is.ErrorContains(opts.Validate(), "--network-plugin kubenet (deprecated upstream) is not supported"))
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in      string
		want    endpoint
		wantErr string
	}{
		{in: "unix:///var/run/cri-dockerd.sock", want: endpoint{scheme: "unix", addr: "/var/run/cri-dockerd.sock"}},
		{in: "tcp://127.0.0.1:9000", want: endpoint{scheme: "tcp", addr: "127.0.0.1:9000"}},
		{in: "fd://", want: endpoint{scheme: "fd"}},
		{in: "unix://", wantErr: "no socket path"},
		{in: "tcp://", wantErr: "no host:port"},
		{in: "http://x", wantErr: "scheme must be"},
	}
	for _, tc := range tests {
		got, err := parseEndpoint(tc.in)
		if tc.wantErr != "" {
			assert.Check(t, is.ErrorContains(err, tc.wantErr), tc.in)
			continue
		}
		assert.NilError(t, err, tc.in)
		assert.Equal(t, got, tc.want)
	}
}

func TestMainPrintsAndRejects(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, Main([]string{"--version"}, &out, &errOut), 0)
	assert.Check(t, strings.HasPrefix(out.String(), "cri-dockerd "+upstreamRelease+"+dockpin."))
	out.Reset()
	assert.Equal(t, Main([]string{"--buildinfo"}, &out, &errOut), 0)
	assert.Check(t, is.Contains(out.String(), "Go version:"))
	out.Reset()
	assert.Equal(t, Main([]string{"--help"}, &out, &errOut), 0)
	assert.Check(t, is.Contains(out.String(), "--pinned-images"))
	assert.Equal(t, Main([]string{"--no-such-flag"}, &out, &errOut), 2)
	errOut.Reset()
	assert.Equal(t, Main([]string{"--hairpin-mode=bad"}, &out, &errOut), 2)
	assert.Check(t, is.Contains(errOut.String(), "--hairpin-mode"))
	errOut.Reset()
	// No engine there: it is waited for (a node booting); once the wait gives up, a
	// clear error and exit code 1, never a panic.
	sock := "unix://" + t.TempDir() + "/none.sock"
	giveUp := engineWait{attempt: time.Second, first: time.Millisecond, max: time.Millisecond, total: 20 * time.Millisecond}
	assert.Equal(t, mainWith([]string{"--docker-endpoint", sock, "--container-runtime-endpoint", "unix://" + t.TempDir() + "/cri.sock"}, &out, &errOut, giveUp), 1)
	assert.Check(t, is.Contains(errOut.String(), "docker engine at "+sock))
}

func TestMainCheckPinsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(path, []byte("# base images\nbusybox:1.36\nregistry.k8s.io/*\n"), 0o600))
	var out, errOut bytes.Buffer
	assert.Equal(t, Main([]string{"--check-pins-file", path}, &out, &errOut), 0)
	assert.Equal(t, out.String(), path+": valid, 2 patterns\n")

	assert.NilError(t, os.WriteFile(path, []byte("busybox:1.36\nBad Line\n"), 0o600))
	out.Reset()
	assert.Equal(t, Main([]string{"--check-pins-file", path}, &out, &errOut), 1)
	assert.Check(t, is.Contains(errOut.String(), "line 2"))
	assert.Equal(t, out.String(), "")
}

// flakyEngine fails its first calls with the errors in fails, then answers.
type flakyEngine struct {
	mu    sync.Mutex
	fails []error
	calls int
}

func (e *flakyEngine) next() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if len(e.fails) == 0 {
		return nil
	}
	err := e.fails[0]
	e.fails = e.fails[1:]
	return err
}

func (e *flakyEngine) CheckVersion(context.Context) (docker.Version, error) {
	return docker.Version{Version: "29.8.1"}, e.next()
}

func (e *flakyEngine) Info(context.Context) (docker.Info, error) {
	return docker.Info{ContainerdStore: true}, e.next()
}

var quickWait = engineWait{attempt: time.Second, first: time.Millisecond, max: 4 * time.Millisecond}

func TestWaitForEngine(t *testing.T) {
	down := errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
	e := &flakyEngine{fails: []error{down, down, nil, errors.New("info: engine starting")}}
	v, info, err := waitForEngine(e, "unix:///var/run/docker.sock", quickWait, nil, logctx.Discard())
	assert.NilError(t, err)
	assert.Equal(t, v.Version, "29.8.1")
	assert.Check(t, info.ContainerdStore, "/info read before anything is decided")
	assert.Equal(t, e.calls, 6)

	old := &flakyEngine{fails: []error{cerrdefs.ErrFailedPrecondition}}
	_, _, err = waitForEngine(old, "unix:///old.sock", quickWait, nil, logctx.Discard())
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "a too old engine is refused at once: %v", err)
	assert.Equal(t, old.calls, 1)

	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGTERM
	never := &flakyEngine{fails: []error{down, down, down}}
	_, _, err = waitForEngine(never, "unix:///gone.sock", engineWait{attempt: time.Second, first: time.Hour, max: time.Hour}, stop, logctx.Discard())
	assert.Check(t, errors.Is(err, errStoppedWaiting))
	assert.Check(t, is.ErrorContains(err, "unix:///gone.sock"))
}
