// Package nri embeds the runtime side of NRI, the Node Resource Interface
// (github.com/containerd/nri's adaptation library, as containerd and CRI-O do): it
// serves the plugin socket, starts pre-installed plugins, relays each pod and
// container lifecycle event to the plugins in their order and returns their
// adjustments. Package core calls it at each lifecycle point and translates the
// adjustments into the engine's container config; what the runtime's state is (for
// synchronising a newly connected plugin) and how plugins' unsolicited updates are
// applied come from core through the Host interface.
package nri
