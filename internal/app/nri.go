package app

import (
	"context"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/dockpin/cri-dockerd/internal/core"
	"github.com/dockpin/cri-dockerd/internal/core/nri"
)

// addNRIFlags registers the NRI flags, named as containerd's and CRI-O's settings.
func addNRIFlags(fs *pflag.FlagSet, c *nri.Config) {
	fs.BoolVar(&c.Enable, "enable-nri", c.Enable, "Enable NRI (Node Resource Interface) plugins: serve --nri-socket-path and relay pod and container lifecycle events to the plugins, applying their adjustments. Off by default: upstream cri-dockerd has none, and the default socket may be containerd's.")
	fs.StringVar(&c.SocketPath, "nri-socket-path", c.SocketPath, "The socket NRI plugins connect to, with --enable-nri.")
	fs.StringVar(&c.PluginPath, "nri-plugin-dir", c.PluginPath, "The directory of pre-installed NRI plugins started with cri-dockerd.")
	fs.StringVar(&c.PluginConfigPath, "nri-plugin-config-dir", c.PluginConfigPath, "The directory of the pre-installed NRI plugins' configuration.")
	fs.DurationVar(&c.RegistrationTimeout, "nri-plugin-registration-timeout", c.RegistrationTimeout, "How long an NRI plugin may take to register.")
	fs.DurationVar(&c.RequestTimeout, "nri-plugin-request-timeout", c.RequestTimeout, "How long an NRI plugin may take to handle one event (its Synchronize included).")
}

// startNRI starts NRI for svc with --enable-nri, and the relay of containers' exits;
// the returned function stops both. Without it, svc runs with Deps.NRI nil.
func startNRI(rt *nri.Runtime, svc *core.Service, log logrus.FieldLogger) (func(), error) {
	if rt == nil {
		return func() {}, nil
	}
	if err := rt.Start(svc); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.WatchNRIExits(ctx); close(done) }()
	log.Info("NRI enabled")
	return func() { cancel(); <-done; rt.Stop() }, nil
}
