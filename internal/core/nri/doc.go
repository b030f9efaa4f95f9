// Package nri embeds the runtime side of NRI, the Node Resource Interface
// (github.com/containerd/nri's adaptation library, as containerd and CRI-O do): it
// serves the plugin socket, starts pre-installed plugins, relays each pod and
// container lifecycle event to the plugins in their order and returns their
// adjustments. Package core calls it at each lifecycle point and translates the
// adjustments into the engine's container config; what the runtime's state is (for
// synchronising a newly connected plugin) and how plugins' unsolicited updates are
// applied come from core through the Host interface.
//
// NRI runs only with --enable-nri. Config holds the flags' settings, named as
// containerd and CRI-O name them; DefaultConfig gives their defaults, with NRI off.
// Runtime wraps the adaptation library: the socket, the pre-installed plugins,
// the registration and request timeouts, one event at a time relayed to the
// plugins in their order, and BlockSync, which holds off the synchronisation of
// newly connecting plugins while a pod or container is being made. Host is
// implemented by core.Service: new plugins are synchronised from its state, and
// their updates are applied through it.
//
// The package imports NRI's library and logrus, and nothing of this module (depguard
// enforces it): core calls it through its NRI interface and serves it as its Host.
package nri
