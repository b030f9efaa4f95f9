// Package app is the cri-dockerd process: upstream-compatible flags and their
// validation, logging, the gRPC server with its one error-converting and logging
// interceptor, unix/tcp/fd:// listeners, sd_notify, and signals (SIGHUP reloads
// pins, SIGTERM stops gracefully). Nothing imports it but main; it may import any
// package of the module, and wires them together.
//
// The version (version.go) is the upstream release this binary is a drop-in for
// plus semver build metadata naming our build, dockpin.<commits>.g<commit>, set at
// link time: 0.4.3+dockpin.175.g1a2b3c4, say.
//
// The flags (options.go) have upstream's names and defaults. The pinning flags are
// pinning.Flags, registered on our flag set and started through pinning.Start as
// any host program's are (an upstream cri-dockerd patched as in patches/ is
// another such host).
//
// The interceptor (server.go) serves unary and streaming RPCs alike: it gives each
// request a logger with rpc and req_id, carried in its context (package logctx),
// bounds it by --runtime-request-timeout (pulls, ExecSync and the streaming RPCs
// aside), recovers a panicking handler as an Internal error, and converts errdefs
// kinds to gRPC codes, the one place this conversion happens. Listeners
// (listen.go) are unix sockets, tcp, or fd:// for a socket systemd passes.
//
// Besides serving the CRI, the binary checks a node's configuration
// (--check-config, check_config.go), validates a pins file (--check-pins-file) and
// gives back what pinning holds in the engine (`cri-dockerd pins release`,
// pins_release.go); with --pin-proxy-backend it serves as the pin proxy of package
// pinproxy instead (proxy.go).
package app
