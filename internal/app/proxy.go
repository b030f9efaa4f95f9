package app

import (
	"context"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/pinproxy"
	"github.com/dockpin/cri-dockerd/pinning"
)

// runProxy serves the CRI on --container-runtime-endpoint as the pin proxy in front of
// --pin-proxy-backend, until SIGTERM or SIGINT; SIGHUP reloads the pins.
func runProxy(opts *Options, engine docker.Client, pins *pinning.Setup, log *logrus.Logger, hup <-chan os.Signal) error {
	images := imageClient(opts, engine, log)
	defer images.stop()
	conn, err := pinproxy.Dial(opts.PinProxyBackend)
	if err != nil {
		return fmt.Errorf("--pin-proxy-backend %s: %w", opts.PinProxyBackend, err)
	}
	defer func() { _ = conn.Close() }()
	conn.Connect() // start connecting now: the first RPC need not wait for it
	p := pinproxy.New(conn, pins, engineLabels{images.client}, log.WithField("component", "proxy"))

	ep, _ := parseEndpoint(opts.RuntimeEndpoint) // validated before
	lis, err := listen(ep)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.RuntimeEndpoint, err)
	}
	// The interceptor logs, recovers and converts as for our own CRI; every RPC reaches
	// it as a stream (the proxy's unknown-service handler), never bounded by the
	// request timeout: the caller's deadline travels to the backend.
	ic := &interceptor{log: log, timeout: opts.requestTimeout()}
	streams := []grpc.StreamServerInterceptor{ic.stream}
	served, err := serveMetrics(opts, watched{pins: pins, cache: images.cache}, log)
	if err != nil {
		return err
	}
	if m := served.registry(); m != nil {
		defer func() { _ = served.server.Close() }()
		_, counted := m.Instrument()
		streams = append([]grpc.StreamServerInterceptor{counted}, streams...)
	}
	srv := grpc.NewServer(append(p.ServerOptions(), grpc.ChainStreamInterceptor(streams...))...)
	log.WithField("endpoint", opts.RuntimeEndpoint).WithField("backend", opts.PinProxyBackend).
		Info("serving the CRI as the pin proxy")
	return serve(serving{srv: srv, lis: lis, timeout: opts.requestTimeout(), hup: hup, reload: pins.ReloadLogged}, log)
}

// engineLabels gives the proxy the image config labels the CRI does not carry.
type engineLabels struct {
	engine docker.Client
}

func (e engineLabels) ImageLabels(ctx context.Context) (map[string]map[string]string, error) {
	imgs, err := e.engine.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(imgs))
	for i := range imgs {
		out[imgs[i].ID] = imgs[i].Labels
	}
	return out, nil
}

func (e engineLabels) ImageLabelsOf(ctx context.Context, id string) (map[string]string, error) {
	img, err := e.engine.InspectImage(ctx, id)
	if err != nil {
		return nil, err
	}
	return img.Labels, nil
}
