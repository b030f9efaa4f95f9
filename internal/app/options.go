package app

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/dockpin/cri-dockerd/pinning"

	"github.com/dockpin/cri-dockerd/internal/core/network"
	"github.com/dockpin/cri-dockerd/internal/core/nri"
	"github.com/dockpin/cri-dockerd/internal/core/streaming"
)

// Options are the command-line options, with upstream cri-dockerd's names and defaults.
type Options struct {
	// RuntimeEndpoint is where the CRI is served: unix://, tcp:// or fd:// (systemd socket activation).
	RuntimeEndpoint string `json:"containerRuntimeEndpoint"`
	// DockerEndpoint is the engine's API endpoint.
	DockerEndpoint string `json:"dockerEndpoint"`
	// RootDirectory holds cri-dockerd's own state (sandbox checkpoints).
	RootDirectory string `json:"criDockerdRootDirectory"`
	// SandboxImage is the pod infra ("pause") image; it is always pinned.
	SandboxImage string `json:"podInfraContainerImage"`
	// NetworkPlugin is "cni" or "" (Docker's default bridge); Validate refuses "kubenet".
	NetworkPlugin string `json:"networkPlugin"`
	// CNIBinDir is a comma-separated list of CNI plugin directories.
	CNIBinDir string `json:"cniBinDir"`
	// CNIConfDir holds CNI network configurations.
	CNIConfDir string `json:"cniConfDir"`
	// CNICacheDir is where CNI keeps its cache.
	CNICacheDir string `json:"cniCacheDir"`
	// NetworkPluginMTU overrides the network plugin's MTU (0 = default).
	NetworkPluginMTU int32 `json:"networkPluginMTU"`
	// HairpinMode is none, promiscuous-bridge or hairpin-veth.
	HairpinMode string `json:"hairpinMode"`
	// PodCIDR is the pod CIDR in standalone mode.
	PodCIDR string `json:"podCIDR"`
	// IPv6DualStack enables dual-stack pods.
	IPv6DualStack bool `json:"ipv6DualStack"`
	// ImagePullProgressDeadline cancels a pull without progress for this long.
	ImagePullProgressDeadline time.Duration `json:"imagePullProgressDeadline"`
	// RuntimeRequestTimeout bounds every non-streaming, non-pull request (0 = 2m minus 1s).
	RuntimeRequestTimeout time.Duration `json:"runtimeRequestTimeout"`
	// StreamingBindAddr is the streaming server's address: an IP (random port) or IP:port; "" = 127.0.0.1, random port.
	StreamingBindAddr string `json:"streamingBindAddr"`
	// RuntimeCgroups is the cgroup to run the runtime in.
	RuntimeCgroups string `json:"runtimeCgroups"`
	// LogLevel is a logrus level name.
	LogLevel string `json:"logLevel"`

	// Flags are the pinning options (--pinned-images, --pin-from-containerd-labels, ...),
	// registered by the pinning package itself, as any host program would.
	pinning.Flags

	// ImageCache answers ListImages/ImageStatus from an event-driven index of the engine's images.
	ImageCache bool `json:"imageCache"`
	// ImageCacheResync is how often the image index is reconciled with the engine's full list.
	ImageCacheResync time.Duration `json:"imageCacheResync"`

	// EngineLogMaxSize and EngineLogMaxFiles bound the engine's own log of containers
	// whose output is copied into a CRI log file (json-file and local drivers; "" = the
	// engine's configuration as it is).
	EngineLogMaxSize  string `json:"engineLogMaxSize"`
	EngineLogMaxFiles int    `json:"engineLogMaxFiles"`

	// PinProxyBackend, when set, makes this process the pin proxy: it serves the CRI on
	// RuntimeEndpoint by forwarding every RPC to the cri-dockerd at this endpoint
	// (unix:// or tcp://), adding our pins to ListImages and ImageStatus ("" = off).
	PinProxyBackend string `json:"pinProxyBackend"`

	// MetricsAddress, when set, is the host:port where Prometheus metrics are served at
	// /metrics ("" = off). Unauthenticated: bind loopback (127.0.0.1:PORT) unless the
	// network is trusted.
	MetricsAddress string `json:"metricsAddress"`
	// EnablePprof serves Go's profiles at /debug/pprof/ on MetricsAddress.
	EnablePprof bool `json:"enablePprof"`

	// NRI are the NRI options (--enable-nri, --nri-socket-path, ...).
	NRI nri.Config `json:"nri"`

	// CheckPinsFile, when set, validates that pins file and exits.
	CheckPinsFile string `json:"-"`
	// CheckConfig checks the other flags, the files and the engine they name, and exits.
	CheckConfig bool `json:"-"`
	// ShowVersion, ShowBuildInfo and ShowHelp print and exit.
	ShowVersion   bool `json:"-"`
	ShowBuildInfo bool `json:"-"`
	ShowHelp      bool `json:"-"`
}

// DefaultRuntimeRequestTimeout is what --runtime-request-timeout=0 means, as upstream.
const DefaultRuntimeRequestTimeout = 2*time.Minute - time.Second

// DefaultOptions returns upstream's defaults.
func DefaultOptions() Options {
	return Options{
		RuntimeEndpoint:           "unix:///var/run/cri-dockerd.sock",
		DockerEndpoint:            "unix:///var/run/docker.sock",
		RootDirectory:             pinning.DefaultRootDirectory,
		SandboxImage:              pinning.DefaultSandboxImage,
		NetworkPlugin:             "cni",
		CNIBinDir:                 "/opt/cni/bin",
		CNIConfDir:                "/etc/cni/net.d",
		CNICacheDir:               "/var/lib/cni/cache",
		HairpinMode:               "none",
		ImagePullProgressDeadline: time.Minute,
		LogLevel:                  "info",
		Flags:                     pinning.DefaultFlags(),
		ImageCache:                true,
		ImageCacheResync:          5 * time.Minute,
		EngineLogMaxSize:          "10m",
		EngineLogMaxFiles:         2,
		NRI:                       nri.DefaultConfig(),
	}
}

// flagSet registers every flag on a new FlagSet bound to o.
func (o *Options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("cri-dockerd", pflag.ContinueOnError)
	fs.SortFlags = true
	fs.StringVar(&o.RuntimeEndpoint, "container-runtime-endpoint", o.RuntimeEndpoint, "The endpoint to serve the CRI on: unix:///path, tcp://host:port, or fd:// for systemd socket activation.")
	fs.StringVar(&o.DockerEndpoint, "docker-endpoint", o.DockerEndpoint, "Use this for the docker endpoint to communicate with.")
	fs.StringVar(&o.RootDirectory, "cri-dockerd-root-directory", o.RootDirectory, "Path to the cri-dockerd root directory.")
	fs.StringVar(&o.SandboxImage, "pod-infra-container-image", o.SandboxImage, "The image whose network/ipc namespaces containers in each pod will use. Always pinned.")
	fs.StringVar(&o.NetworkPlugin, "network-plugin", o.NetworkPlugin, "The name of the network plugin: cni, or empty for Docker's default bridge network.")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", o.CNIBinDir, "A comma-separated list of full paths of directories in which to search for CNI plugin binaries.")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", o.CNIConfDir, "The full path of the directory in which to search for CNI config files.")
	fs.StringVar(&o.CNICacheDir, "cni-cache-dir", o.CNICacheDir, "The full path of the directory in which CNI should store cache files.")
	fs.Int32Var(&o.NetworkPluginMTU, "network-plugin-mtu", o.NetworkPluginMTU, "The MTU to be passed to the network plugin, to override the default (0 = default).")
	fs.StringVar(&o.HairpinMode, "hairpin-mode", o.HairpinMode, "The mode of hairpin to use: none, promiscuous-bridge or hairpin-veth.")
	fs.StringVar(&o.PodCIDR, "pod-cidr", o.PodCIDR, "The CIDR to use for pod IP addresses, only used in standalone mode.")
	fs.BoolVar(&o.IPv6DualStack, "ipv6-dual-stack", o.IPv6DualStack, "Enable IPv6 dual stack support.")
	fs.DurationVar(&o.ImagePullProgressDeadline, "image-pull-progress-deadline", o.ImagePullProgressDeadline, "If no pulling progress is made before this deadline, the image pulling will be cancelled.")
	fs.DurationVar(&o.RuntimeRequestTimeout, "runtime-request-timeout", o.RuntimeRequestTimeout, "If no runtime progress is made before this deadline, the operation will be cancelled (0 = 2m minus 1s).")
	fs.StringVar(&o.StreamingBindAddr, "streaming-bind-addr", o.StreamingBindAddr, "The address (IP or IP:port) to bind the CRI streaming server (exec, attach, port-forward) to. If not specified, 127.0.0.1 with a random port: kubelet proxies streams from the same node.")
	fs.StringVar(&o.RuntimeCgroups, "runtime-cgroups", o.RuntimeCgroups, "Optional absolute name of cgroups to create and run the runtime in.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "The log level: panic, fatal, error, warn, info, debug or trace.")
	o.AddFlags(fs) // pinning.Flags registers the pinning flags
	fs.BoolVar(&o.ImageCache, "image-cache", o.ImageCache, "Answer ListImages and ImageStatus from an in-memory index kept current from the engine's events (false: call the engine on every request, as upstream).")
	fs.DurationVar(&o.ImageCacheResync, "image-cache-resync", o.ImageCacheResync, "How often the image index is reconciled with the engine's full image list.")
	fs.StringVar(&o.EngineLogMaxSize, "engine-log-max-size", o.EngineLogMaxSize, "Bound the engine's own log of each container whose output is copied into a CRI log file to files of this size (the engine's max-size option, json-file and local drivers). \"\" keeps the engine's log configuration.")
	fs.IntVar(&o.EngineLogMaxFiles, "engine-log-max-files", o.EngineLogMaxFiles, "How many engine log files (the live one included) each such container keeps, with --engine-log-max-size.")
	fs.StringVar(&o.PinProxyBackend, "pin-proxy-backend", o.PinProxyBackend, "Run as the pin proxy in front of an unmodified cri-dockerd at this endpoint (unix:///path or tcp://host:port): serve the CRI on --container-runtime-endpoint by forwarding every RPC to it, reporting images our pin flags pin as pinned in ListImages and ImageStatus. Empty: off.")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "The host:port to serve Prometheus metrics on, at /metrics (unauthenticated: bind 127.0.0.1 unless the network is trusted). Empty: off.")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof, "Serve Go's profiles at /debug/pprof/ on --metrics-address.")
	addNRIFlags(fs, &o.NRI)
	fs.StringVar(&o.CheckPinsFile, "check-pins-file", o.CheckPinsFile, "Validate this pins file as SIGHUP would read it, print the result and exit (0: valid; 1: each bad line named). Touches no running daemon.")
	fs.BoolVar(&o.CheckConfig, "check-config", o.CheckConfig, "Check the flags given with it (the node's own), the pins file and directory, the root directory, the CNI configuration and plugins, and that the engine answers with a supported API; print one line per check and exit (0: no error; 1: an error). Serves nothing, changes nothing: run it before swapping binaries.")
	fs.BoolVar(&o.ShowVersion, "version", false, "Prints the version of cri-dockerd.")
	fs.BoolVar(&o.ShowBuildInfo, "buildinfo", false, "Prints the build information about cri-dockerd.")
	fs.BoolVarP(&o.ShowHelp, "help", "h", false, "Help for cri-dockerd.")
	return fs
}

// Validate checks every option and returns all problems at once.
func (o *Options) Validate() error {
	var errs []error
	if _, err := parseEndpoint(o.RuntimeEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("--container-runtime-endpoint: %w", err))
	}
	if o.DockerEndpoint == "" {
		errs = append(errs, errors.New("--docker-endpoint must not be empty"))
	}
	switch o.NetworkPlugin {
	case "", "cni":
	case "kubenet":
		errs = append(errs, errors.New(`--network-plugin kubenet (deprecated upstream) is not supported: use cni with a bridge configuration, or "" for Docker's bridge`))
	default:
		errs = append(errs, fmt.Errorf("--network-plugin %q: must be cni or empty", o.NetworkPlugin))
	}
	if err := (streaming.Config{Addr: o.StreamingBindAddr}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--streaming-bind-addr %q: %w", o.StreamingBindAddr, err))
	}
	switch o.HairpinMode {
	case "none", "promiscuous-bridge", "hairpin-veth":
	default:
		errs = append(errs, fmt.Errorf("--hairpin-mode %q: must be none, promiscuous-bridge or hairpin-veth", o.HairpinMode))
	}
	if _, err := logrus.ParseLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: must be one of panic, fatal, error, warn, info, debug, trace", o.LogLevel))
	}
	if o.ImagePullProgressDeadline < 0 || o.RuntimeRequestTimeout < 0 {
		errs = append(errs, errors.New("--image-pull-progress-deadline and --runtime-request-timeout must not be negative"))
	}
	if strings.TrimSpace(o.SandboxImage) == "" {
		errs = append(errs, errors.New("--pod-infra-container-image must not be empty"))
	}
	if err := o.validateEngineLog(); err != nil {
		errs = append(errs, err)
	}
	if o.ImageCacheResync <= 0 {
		errs = append(errs, errors.New("--image-cache-resync must be positive"))
	}
	if err := o.validateProxy(); err != nil {
		errs = append(errs, err)
	}
	if err := o.validateMetrics(); err != nil {
		errs = append(errs, err)
	}
	if err := o.NRI.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Flags.Validate(o.SandboxImage); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateEngineLog checks --engine-log-max-size (a size as the engine reads it:
// "10m", "512k") and --engine-log-max-files.
func (o *Options) validateEngineLog() error {
	if o.EngineLogMaxSize == "" {
		return nil
	}
	if n, err := units.RAMInBytes(o.EngineLogMaxSize); err != nil || n <= 0 {
		return fmt.Errorf("--engine-log-max-size %q: want a positive size such as 10m or 512k", o.EngineLogMaxSize)
	}
	if o.EngineLogMaxFiles < 1 {
		return fmt.Errorf("--engine-log-max-files %d: must be at least 1", o.EngineLogMaxFiles)
	}
	return nil
}

// validateMetrics checks --metrics-address (host:port) and that --enable-pprof has it.
func (o *Options) validateMetrics() error {
	if o.MetricsAddress == "" {
		if o.EnablePprof {
			return errors.New("--enable-pprof serves on --metrics-address, which is not set")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
		return fmt.Errorf("--metrics-address %q: want host:port: %w", o.MetricsAddress, err)
	}
	return nil
}

// validateProxy checks --pin-proxy-backend: a unix or tcp endpoint other than our own.
func (o *Options) validateProxy() error {
	if o.PinProxyBackend == "" {
		return nil
	}
	ep, err := parseEndpoint(o.PinProxyBackend)
	switch {
	case err != nil:
		return fmt.Errorf("--pin-proxy-backend: %w", err)
	case ep.scheme == "fd":
		return errors.New("--pin-proxy-backend: the backend is dialled: unix:// or tcp://, not fd://")
	}
	if own, err := parseEndpoint(o.RuntimeEndpoint); err == nil && own == ep {
		return fmt.Errorf("--pin-proxy-backend %s is --container-runtime-endpoint: the proxy would forward to itself", o.PinProxyBackend)
	}
	return nil
}

// requestTimeout is the effective --runtime-request-timeout.
func (o *Options) requestTimeout() time.Duration {
	if o.RuntimeRequestTimeout == 0 {
		return DefaultRuntimeRequestTimeout
	}
	return o.RuntimeRequestTimeout
}

// pinningConfig is the pinning configuration the options make (state in
// <root>/pinning).
func (o *Options) pinningConfig() pinning.Config {
	return o.Config(o.SandboxImage, o.RootDirectory) // pinning.Flags.Config
}

// networkConfig is the CNI part of the options.
func (o *Options) networkConfig() network.Config {
	return network.Config{
		PluginName:  o.NetworkPlugin,
		BinDirs:     network.SplitBinDirs(o.CNIBinDir),
		ConfDir:     o.CNIConfDir,
		CacheDir:    o.CNICacheDir,
		MTU:         int(o.NetworkPluginMTU),
		HairpinMode: network.HairpinMode(o.HairpinMode),
		PodCIDR:     o.PodCIDR,
	}
}
