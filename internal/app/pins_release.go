package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/pinning"
)

// releaseTimeout bounds `cri-dockerd pins release`.
const releaseTimeout = 2 * time.Minute

// pinsRelease is `cri-dockerd pins release`: gives back what pinning holds in the
// engine (pinning.Release: the lease of the instance with this root directory,
// dockpin.pinned for the default one, and the labels it set on image records), for an
// uninstall or a move back to upstream cri-dockerd, which the packages' removal runs
// after stopping the service. The engine, containerd and root directory flags are the
// node's (--docker-endpoint, --containerd-address, --containerd-namespace,
// --cri-dockerd-root-directory).
func pinsRelease(opts *Options, stdout, stderr io.Writer) int {
	log := newLogger(stderr, opts.LogLevel)
	client, err := docker.NewSDKClient(opts.DockerEndpoint)
	if err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: pins release: %v\n", err)
		return 1
	}
	defer func() { _ = client.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := client.CheckVersion(ctx); err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: pins release: docker engine at %s: %v\n", opts.DockerEndpoint, err)
		return 1
	}
	info, err := client.Info(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: pins release: docker engine at %s: %v\n", opts.DockerEndpoint, err)
		return 1
	}
	out, err := pinning.Release(ctx, opts.Flags, pinning.Host{DockerEndpoint: opts.DockerEndpoint, RootDirectory: opts.RootDirectory},
		pinEngine{client: client, info: info}, log.WithField("component", "pins-release"))
	printReleased(stdout, out)
	if err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: pins release: %v\n", err)
		return 1
	}
	return 0
}

func printReleased(w io.Writer, r pinning.Released) {
	switch r.Store {
	case "classic":
		fmt.Fprintln(w, "classic image store: pinning holds nothing in the engine")
		return
	case "":
		return
	}
	if r.Lease != "" {
		fmt.Fprintf(w, "lease %s deleted (it held %d content blobs, now collectable)\n", r.Lease, r.LeasedBlobs)
	}
	fmt.Fprintf(w, "pinning labels removed from %d image record(s)\n", len(r.Relabelled))
	for _, name := range r.Relabelled {
		fmt.Fprintf(w, "  %s\n", name)
	}
}
