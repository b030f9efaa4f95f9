package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
)

// SDKClient is the Client backed by the Docker SDK.
type SDKClient struct {
	api *client.Client
	// inContainer tells whether a host process belongs to a container before an
	// exec's process is killed (processInContainer; tests replace it).
	inContainer func(pid int, containerID string) bool
}

var _ Client = (*SDKClient)(nil)

// maxIdleConns is how many idle connections to the engine are kept for reuse.
const maxIdleConns = 16

// NewSDKClient returns a client for endpoint ("unix:///var/run/docker.sock",
// "tcp://host:2375"); the API version is negotiated on first use.
func NewSDKClient(endpoint string) (*SDKClient, error) {
	// The SDK's own HTTP client, but one we hold, so that its transport can be timed.
	// Requests run at once (kubelet's pod workers, and our own fan-out: a pod's
	// containers stopped or removed together) keep their connections: with Go's
	// default of 2 idle connections per host, each one past the second was closed
	// after use and dialled again (32 engine connections in one critest benchmark run, upstream 2).
	hc := &http.Client{
		Transport:     &http.Transport{MaxIdleConns: maxIdleConns, MaxIdleConnsPerHost: maxIdleConns, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: client.CheckRedirect,
	}
	opts := []client.Opt{client.WithHTTPClient(hc), client.WithHost(client.DefaultDockerHost), client.WithAPIVersionNegotiation()}
	if endpoint != "" {
		opts = append(opts, client.WithHost(endpoint))
	} else {
		opts = append(opts, client.FromEnv)
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %q: %w", endpoint, errors.Join(cerrdefs.ErrInvalidArgument, err))
	}
	// The SDK has wrapped the transport (its tracing) and kept the base one for its
	// hijacked streams and Close: the timing goes around both.
	hc.Transport = timedTransport{next: hc.Transport}
	return &SDKClient{api: api, inContainer: processInContainer}, nil
}

// Close releases the client's connections.
func (c *SDKClient) Close() error { return c.api.Close() }

// CheckVersion negotiates the API version and refuses engines older than MinAPIVersion.
func (c *SDKClient) CheckVersion(ctx context.Context) (Version, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return v, err
	}
	if versions.LessThan(v.APIVersion, MinAPIVersion) {
		return v, fmt.Errorf("docker engine %s speaks API %s, but cri-dockerd needs API %s (Docker 23) or newer: %w",
			v.Version, v.APIVersion, MinAPIVersion, cerrdefs.ErrFailedPrecondition)
	}
	return v, nil
}

// Ping checks that the engine answers.
func (c *SDKClient) Ping(ctx context.Context) error {
	_, err := c.api.Ping(ctx)
	return classify("ping docker", err)
}

// Version returns the engine version. The API version is negotiated once, by the
// client's first request (kubelet calls Version often: no extra ping per call).
func (c *SDKClient) Version(ctx context.Context) (Version, error) {
	v, err := c.api.ServerVersion(ctx)
	if err != nil {
		return Version{}, classify("docker version", err)
	}
	return Version{Version: v.Version, APIVersion: v.APIVersion, NegotiatedAPIVersion: c.api.ClientVersion()}, nil
}

// Info returns the subset of /info this shim uses.
func (c *SDKClient) Info(ctx context.Context) (Info, error) {
	in, err := c.api.Info(ctx)
	if err != nil {
		return Info{}, classify("docker info", err)
	}
	out := Info{
		Driver: in.Driver, DriverStatus: in.DriverStatus, DockerRootDir: in.DockerRootDir,
		CgroupDriver: in.CgroupDriver, DefaultRuntime: in.DefaultRuntime, LoggingDriver: in.LoggingDriver,
		Experimental: in.ExperimentalBuild,
	}
	for name := range in.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
	}
	slices.Sort(out.Runtimes)
	for _, kv := range in.DriverStatus {
		if kv[0] == "driver-type" && kv[1] == "io.containerd.snapshotter.v1" {
			out.ContainerdStore = true
		}
	}
	out.CDISpecDirs = in.CDISpecDirs
	out.CDIDevicesReported = !versions.LessThan(c.api.ClientVersion(), "1.50")
	for _, d := range in.DiscoveredDevices {
		if d.Source == "cdi" {
			out.CDIDevices = append(out.CDIDevices, d.ID)
		}
	}
	if in.Containerd != nil {
		out.ContainerdAddress = in.Containerd.Address
		out.ContainerdNamespace = in.Containerd.Namespaces.Containers
	}
	return out, nil
}
