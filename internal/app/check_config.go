package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/network"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning"
)

// checkTimeout bounds each check of --check-config that asks the engine.
const checkTimeout = 10 * time.Second

// checker prints the result of each pre-flight check and counts the errors.
type checker struct {
	out    io.Writer
	errors int
}

func (c *checker) ok(what, format string, args ...any) {
	fmt.Fprintf(c.out, "ok     %-12s %s\n", what, fmt.Sprintf(format, args...))
}

func (c *checker) warn(what, format string, args ...any) {
	fmt.Fprintf(c.out, "warn   %-12s %s\n", what, fmt.Sprintf(format, args...))
}

func (c *checker) fail(what string, err error) {
	c.errors++
	fmt.Fprintf(c.out, "error  %-12s %v\n", what, err)
}

// checkConfig is --check-config: the pre-flight check of a node's flags before this
// binary takes over (or after an edit of its drop-in): the flags themselves, the pins
// file and directory, the root directory, the CNI configuration and plugins, and the
// engine (reachable, new enough, its image store). It serves nothing and changes
// nothing. Exit code 0 when no check failed (warnings allowed), 1 otherwise.
func checkConfig(opts *Options, stdout io.Writer, engine func(endpoint string) (engineProbe, func(), error)) int {
	c := &checker{out: stdout}
	if err := opts.Validate(); err != nil {
		c.fail("flags", err)
	} else {
		c.ok("flags", "valid")
	}
	checkPins(c, opts)
	checkRootDir(c, opts.RootDirectory)
	if opts.PinProxyBackend == "" {
		checkCNI(c, opts)
	}
	checkEngine(c, opts, engine)
	if c.errors > 0 {
		fmt.Fprintf(stdout, "%d check(s) failed\n", c.errors)
		return 1
	}
	fmt.Fprintln(stdout, "all checks passed")
	return 0
}

func checkPins(c *checker, opts *Options) {
	file, dir := opts.PinnedImagesFile, opts.PinnedImagesDir
	if file == "" && dir == "" {
		c.ok("pins", "no pins file or directory")
		return
	}
	files, n, err := pinning.CheckPins(file, dir)
	if err != nil {
		c.fail("pins", err)
		return
	}
	c.ok("pins", "%d pattern(s) from %d file(s) (file %q, directory %q)", n, len(files), file, dir)
}

func checkRootDir(c *checker, dir string) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.ok("root-dir", "%s does not exist yet; it is created at start", dir)
	case err != nil:
		c.fail("root-dir", err)
	case !st.IsDir():
		c.fail("root-dir", fmt.Errorf("%s is not a directory", dir))
	default:
		c.ok("root-dir", "%s", dir)
	}
}

func checkCNI(c *checker, opts *Options) {
	if opts.NetworkPlugin != network.PluginCNI {
		c.ok("network", "no network plugin: pods use Docker's default bridge")
		return
	}
	m, err := network.New(opts.networkConfig(), logctx.Discard())
	if err != nil {
		c.fail("network", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	file, name, err := m.Config(ctx)
	if err != nil {
		// Not fatal on a node being set up: the CNI provider (flannel, calico, ...)
		// often writes its configuration after the runtime starts; until then kubelet
		// reports the node NetworkNotReady.
		c.warn("network", "pods get no network until this is fixed (kubelet reports NetworkNotReady): %v", err)
		return
	}
	c.ok("network", "CNI network %q from %s, plugins found in %s", name, file, opts.CNIBinDir)
}

func checkEngine(c *checker, opts *Options, engine func(endpoint string) (engineProbe, func(), error)) {
	e, closeEngine, err := engine(opts.DockerEndpoint)
	if err != nil {
		c.fail("engine", err)
		return
	}
	defer closeEngine()
	v, info, err := probeEngine(e, checkTimeout)
	if err != nil {
		c.fail("engine", fmt.Errorf("docker engine at %s: %w", opts.DockerEndpoint, err))
		return
	}
	c.ok("engine", "Docker %s at %s, API %s (at least %s needed)", v.Version, opts.DockerEndpoint, v.NegotiatedAPIVersion, docker.MinAPIVersion)
	if !info.ContainerdStore {
		c.ok("image-store", "classic (driver %s): pins from containerd record labels do not apply", info.Driver)
		return
	}
	addr := opts.ContainerdAddress
	if addr == "" {
		addr = info.ContainerdAddress
	}
	if opts.PinFromContainerdLabels == "false" {
		c.ok("image-store", "containerd; record-label pins turned off")
		return
	}
	if addr == "" {
		c.warn("image-store", "containerd, but neither the engine nor --containerd-address names its socket: record-label pins need --containerd-address")
		return
	}
	if _, err := os.Stat(addr); err != nil {
		c.warn("image-store", "containerd at %s: %v (record-label pins need that socket; set --containerd-address)", addr, err)
		return
	}
	c.ok("image-store", "containerd at %s", addr)
}

// newEngineProbe is --check-config's engine: the Docker SDK client.
func newEngineProbe(endpoint string) (engineProbe, func(), error) {
	client, err := docker.NewSDKClient(endpoint)
	if err != nil {
		return nil, nil, err
	}
	return client, func() { _ = client.Close() }, nil
}
