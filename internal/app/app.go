package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/dockpin/cri-dockerd/internal/core"
	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/containerview"
	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/imagecache"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
	"github.com/dockpin/cri-dockerd/internal/core/network"
	"github.com/dockpin/cri-dockerd/internal/core/nri"
	"github.com/dockpin/cri-dockerd/internal/core/stats"
	"github.com/dockpin/cri-dockerd/internal/core/streaming"
	"github.com/dockpin/cri-dockerd/internal/metrics"
	"github.com/dockpin/cri-dockerd/pinning"
)

// logRecordsDir is where, below --cri-dockerd-root-directory, the log file chosen for
// each container is recorded.
const logRecordsDir = "container-logs"

// startupTimeout bounds the engine checks made before serving.
const startupTimeout = 30 * time.Second

// Main runs cri-dockerd with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return mainWith(args, stdout, stderr, defaultEngineWait)
}

// mainWith is Main waiting for the engine as wait says.
func mainWith(args []string, stdout, stderr io.Writer, wait engineWait) int {
	// First of all: a SIGHUP (systemd's ExecReload) during a long start-up, a preload
	// say, must not kill the process, as SIGHUP's default action would.
	hup := make(chan os.Signal, 8)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	opts := DefaultOptions()
	fs := opts.flagSet()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cri-dockerd: %v\n", err)
		return 2
	}
	switch {
	case opts.ShowHelp:
		fmt.Fprintf(stdout, "CRI that connects to the Docker Daemon, with image pinning\n\nUsage:\n  cri-dockerd [flags]\n\nFlags:\n%s", fs.FlagUsagesWrapped(2))
		return 0
	case opts.ShowVersion:
		printVersion(stdout)
		return 0
	case opts.ShowBuildInfo:
		printBuildInfo(stdout)
		return 0
	case opts.CheckPinsFile != "":
		return checkPinsFile(opts.CheckPinsFile, stdout, stderr)
	case opts.CheckConfig:
		return checkConfig(&opts, stdout, newEngineProbe)
	case fs.NArg() == 2 && fs.Arg(0) == "pins" && fs.Arg(1) == "release":
		if err := opts.Validate(); err != nil {
			fmt.Fprintf(stderr, "cri-dockerd: invalid configuration:\n%v\n", err)
			return 2
		}
		return pinsRelease(&opts, stdout, stderr)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "cri-dockerd: unknown command %q (the one command is \"pins release\")\n", strings.Join(fs.Args(), " "))
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: invalid configuration:\n%v\n", err)
		return 2
	}
	log := newLogger(stderr, opts.LogLevel)
	if err := run(&opts, log, hup, wait); err != nil {
		log.WithError(err).Error("cri-dockerd stopped")
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(w)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano})
	lvl, _ := logrus.ParseLevel(level) // validated before
	log.SetLevel(lvl)
	return log
}

// checkPinsFile validates a pins file for --check-pins-file.
func checkPinsFile(path string, stdout, stderr io.Writer) int {
	n, err := pinning.CheckPinsFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "cri-dockerd: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid, %d patterns\n", path, n)
	return 0
}

// run serves until SIGTERM or SIGINT; hup delivers SIGHUP, which reloads the pins.
func run(opts *Options, log *logrus.Logger, hup <-chan os.Signal, wait engineWait) error {
	log.WithField("version", versionString()).WithField("commit", shortCommit()).Info("starting cri-dockerd")
	client, err := docker.NewSDKClient(opts.DockerEndpoint)
	if err != nil {
		return err
	}
	defer client.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	v, info, err := waitForEngine(client, opts.DockerEndpoint, wait, stop, log)
	signal.Stop(stop)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
	defer cancel()
	log.WithField("engine", v.Version).WithField("api", v.NegotiatedAPIVersion).
		WithField("containerd_store", info.ContainerdStore).Info("connected to docker engine")
	for _, limit := range engineLimits(v) {
		log.WithField("engine", v.Version).Warn(limit)
	}

	pins, err := pinning.Start(ctx, opts.Flags, pinning.Host{
		SandboxImage: opts.SandboxImage, RootDirectory: opts.RootDirectory, DockerEndpoint: opts.DockerEndpoint,
	}, pinEngine{client: client, info: info, credentialFiles: core.DefaultCredentialFiles(), pullDeadline: opts.ImagePullProgressDeadline},
		log.WithField("component", "pinning"))
	if err != nil {
		return err
	}
	defer pins.Close()
	if opts.PinProxyBackend != "" {
		return runProxy(opts, client, pins, log, hup)
	}
	checkpoints, err := checkpoint.NewStore(opts.RootDirectory)
	if err != nil {
		return err
	}
	svcCfg := core.Config{
		ImagePullProgressDeadline: opts.ImagePullProgressDeadline,
		Effective:                 opts,
		SandboxImage:              opts.SandboxImage,
		CredentialFiles:           core.DefaultCredentialFiles(),
		RecursiveReadOnlyMounts:   v.APIAtLeast("1.44"),
		EngineLog:                 core.EngineLogLimits{MaxSize: opts.EngineLogMaxSize, MaxFiles: opts.EngineLogMaxFiles},
		ImageVolumes:              v.APIAtLeast("1.48"),
		ImageVolumeSubpaths:       v.APIAtLeast("1.51"),
		RefusePinnedRemoval:       opts.RestorePinnedImages,
	}
	layers := stats.NewLayers("/", layerPeriod, log.WithField("component", "layers"))
	layersCtx, stopLayers := context.WithCancel(context.Background())
	defer stopLayers()
	go layers.Run(layersCtx)
	deps := core.Deps{Pins: pins, Preload: pins, Checkpoints: checkpoints, Metrics: stats.NewCollector("/"), Layers: layers, Log: log}
	if opts.NetworkPlugin != "" { // "cni": Validate refused anything else
		nw, err := network.New(opts.networkConfig(), log.WithField("component", "cni"))
		if err != nil {
			return err
		}
		deps.Network = nw
	}
	logCopier := logs.NewManager(client, logs.Config{StateDir: filepath.Join(opts.RootDirectory, logRecordsDir)}, log.WithField("component", "logs"))
	defer logCopier.Close()
	deps.Logs = logCopier
	streamCfg := streaming.DefaultConfig()
	streamCfg.Addr = opts.StreamingBindAddr
	streams, err := streaming.New(streamCfg, client, log.WithField("component", "streaming"))
	if err != nil {
		return err
	}
	defer func() { _ = streams.Close() }()
	streamsDone := make(chan error, 1)
	go func() { streamsDone <- streams.Serve() }()
	log.WithField("address", streams.Addr()).Info("serving exec, attach and port-forward streams")
	deps.Streaming = streams
	images := imageClient(opts, client, log)
	defer images.stop()
	view := containerview.New(images.client, containerListMaxAge, containerListQuiet, log.WithField("component", "containerview"))
	viewCtx, stopView := context.WithCancel(context.Background())
	defer stopView()
	go view.Run(viewCtx, time.Second)
	deps.StatusInfo = map[string]func() any{"imageCache": images.info, "containerView": func() any { return view.State() }}
	deps.Docker = view
	if keeper := pins.PinKeeper(); keeper != nil {
		deps.Docker = core.KeepPins(view, keeper)
	}
	var nriRuntime *nri.Runtime
	if opts.NRI.Enable {
		if nriRuntime, err = nri.New(opts.NRI, versionString(), log.WithField("component", "nri")); err != nil {
			return err
		}
		deps.NRI = nriRuntime
	}
	svc := core.New(svcCfg, deps)
	stopNRI, err := startNRI(nriRuntime, svc, log)
	if err != nil {
		return err
	}
	defer stopNRI()
	// Its own deadline: preloading images may have used up the startup one.
	resumeCtx, cancelResume := context.WithTimeout(context.Background(), startupTimeout)
	if err := svc.ResumeLogs(resumeCtx); err != nil {
		log.WithError(err).Warn("cannot resume copying container logs")
	}
	cancelResume()

	ep, _ := parseEndpoint(opts.RuntimeEndpoint) // validated before
	lis, err := listen(ep)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.RuntimeEndpoint, err)
	}
	served, err := serveMetrics(opts, watched{pins: pins, cache: images.cache, streams: streams, logs: logCopier}, log)
	if err != nil {
		return err
	}
	if served != nil {
		defer func() { _ = served.server.Close() }()
	}
	srv := newGRPCServer(svc, log, opts.requestTimeout(), served.registry())
	log.WithField("endpoint", opts.RuntimeEndpoint).Info("serving the CRI")
	failed := make(chan error, 1)
	// Without the streaming server every exec, attach and port-forward would fail.
	go func() { failed <- fmt.Errorf("streaming server stopped: %w", <-streamsDone) }()
	return serve(serving{
		srv: srv, lis: lis, timeout: opts.requestTimeout(), hup: hup, reload: pins.ReloadLogged, failed: failed,
	}, log)
}

// containerListMaxAge bounds how long container lists are answered from the
// container view without asking the engine, should an event ever be lost.
const containerListMaxAge = 10 * time.Second

// containerListQuiet: container lists asked for less than this after a change go to the
// engine with their filter (a stop storm's lists stay small); after it, one full list
// answers the relists until the next change.
const containerListQuiet = time.Second

// layerPeriod is how often each running container's writable layer is measured for
// its stats (containerd's default stats_collect_period).
const layerPeriod = 10 * time.Second

// servedMetrics is the metrics registry and the server serving it on --metrics-address.
type servedMetrics struct {
	metrics *metrics.Metrics
	server  *metrics.Server
}

// registry is the metrics to instrument the gRPC server with; nil when metrics are off.
func (m *servedMetrics) registry() *metrics.Metrics {
	if m == nil {
		return nil
	}
	return m.metrics
}

// watched are the parts whose state the metrics show.
type watched struct {
	pins metrics.PinHealth
	// cache is nil with --image-cache=false.
	cache metrics.ImageCacheStats
	// streams and logs are nil in the pin proxy, which forwards streaming and container
	// creation to its backend.
	streams metrics.OpenSessions
	logs    metrics.LogStats
}

// serveMetrics serves the metrics (and pprof) on --metrics-address; nil when it is not set.
func serveMetrics(opts *Options, w watched, log logrus.FieldLogger) (*servedMetrics, error) {
	if opts.MetricsAddress == "" {
		return nil, nil
	}
	m := metrics.New(metrics.Build{Version: versionString(), Commit: shortCommit(), UpstreamRelease: upstreamRelease})
	m.WatchPins(w.pins)
	if w.cache != nil {
		m.WatchImageCache(w.cache)
	}
	if w.streams != nil {
		m.WatchStreaming(w.streams)
	}
	if w.logs != nil {
		m.WatchLogs(w.logs)
	}
	srv, err := metrics.Listen(opts.MetricsAddress, m, opts.EnablePprof, log.WithField("component", "metrics"))
	if err != nil {
		return nil, fmt.Errorf("--metrics-address %s: %w", opts.MetricsAddress, err)
	}
	log.WithField("address", srv.Addr().String()).WithField("pprof", opts.EnablePprof).Info("serving metrics at /metrics")
	return &servedMetrics{metrics: m, server: srv}, nil
}

// engineImages is the engine client the service uses, with the image cache in front
// of it when enabled.
type engineImages struct {
	client docker.Client
	// info is the cache's state for verbose Status.
	info func() any
	stop func()
	// cache is the image cache, for metrics; nil when --image-cache=false.
	cache metrics.ImageCacheStats
}

func imageClient(opts *Options, engine docker.Client, log logrus.FieldLogger) engineImages {
	if !opts.ImageCache {
		info := func() any {
			return map[string]any{"enabled": false, "reason": "--image-cache=false: every request calls the engine"}
		}
		return engineImages{client: engine, info: info, stop: func() {}}
	}
	cacheCfg := imagecache.DefaultConfig()
	cacheCfg.ResyncInterval = opts.ImageCacheResync
	cache := imagecache.New(engine, cacheCfg, log.WithField("component", "imagecache"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cache.Run(ctx); close(done) }()
	return engineImages{client: cache, info: func() any { return cache.CacheInfo() }, stop: func() { cancel(); <-done }, cache: cache}
}

// pinEngine is the engine as pinning sees it: the /info read at start, image loads,
// image lookups and the pulls of preload lists (with the node's credentials, as the
// sandbox image is pulled).
type pinEngine struct {
	client          docker.Client
	info            docker.Info
	credentialFiles []string
	pullDeadline    time.Duration
}

func (e pinEngine) HasImage(ctx context.Context, ref string) (bool, error) {
	_, err := e.client.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (e pinEngine) PullImage(ctx context.Context, ref string) error {
	auth, err := core.NodeCredentials(e.credentialFiles, ref)
	if err != nil {
		return err
	}
	return e.client.PullImage(ctx, ref, docker.PullOptions{Auth: auth, ProgressDeadline: e.pullDeadline})
}

func (e pinEngine) EngineInfo(context.Context) (pinning.EngineInfo, error) {
	return pinning.EngineInfo{
		Driver: e.info.Driver, ContainerdStore: e.info.ContainerdStore,
		ContainerdAddress: e.info.ContainerdAddress, ContainerdNamespace: e.info.ContainerdNamespace,
	}, nil
}

func (e pinEngine) LoadImages(ctx context.Context, archive io.Reader) ([]string, error) {
	return e.client.LoadImages(ctx, archive)
}

// Images lists the engine's images for the sticky pins (pinning.ImageWatcher).
func (e pinEngine) Images(ctx context.Context) ([]pinning.Image, error) {
	imgs, err := e.client.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]pinning.Image, len(imgs))
	for i, img := range imgs {
		out[i] = pinning.Image{ID: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests, Labels: img.Labels}
	}
	return out, nil
}

// WatchImageRemovals calls removed after each image delete or untag event
// (pinning.ImageWatcher), until ctx ends or the event stream breaks.
func (e pinEngine) WatchImageRemovals(ctx context.Context, removed func(at time.Time)) error {
	events, errs := e.client.ImageEvents(ctx, time.Now())
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return <-errs
			}
			if ev.Action == "delete" || ev.Action == "untag" {
				removed(ev.Time)
			}
		case err := <-errs:
			return err
		}
	}
}

// gracefulStop lets in-flight RPCs finish, bounded by timeout.
func gracefulStop(srv interface {
	GracefulStop()
	Stop()
}, timeout time.Duration, log logrus.FieldLogger) {
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		log.Warn("in-flight requests did not finish in time; stopping now")
		srv.Stop()
	}
}
