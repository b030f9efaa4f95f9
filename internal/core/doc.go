// Package core implements the CRI runtime.v1 RuntimeService and ImageService on
// top of Docker Engine, one file per RPC. It talks to the engine only through the
// docker.Client interface and decides pinning only through the Pinner interface;
// it returns errors carrying containerd errdefs kinds, which the gRPC server
// converts to status codes in one interceptor. It imports neither the Docker SDK
// nor grpc/status (depguard, in .golangci.yml, refuses both).
//
// # Files
//
// Each RPC has a file of its own named after it (image_list.go, sandbox_run.go,
// container_create.go, ...), with its tests beside it in _test.go files. The
// engine's names of sandboxes and containers, as upstream cri-dockerd writes them,
// are made and parsed in naming.go; the labels put on them are in labels.go.
// images.go holds what the image RPCs share, among it the CRI image filter's own
// matcher (an image ID or ID prefix, or a reference). resources.go maps CRI
// resources onto the engine's with the swap semantics: the engine's swap limit
// is memory plus swap, as memory_swap_limit_in_bytes is, so cgroup v2's
// memory.swap.max (swap alone) becomes the memory limit plus that, and a swap limit
// without a memory limit is not applied. mounts.go checks CRI mounts, refusing what
// the engine cannot do, and maps image volumes onto the engine's image mounts.
//
// # Settings and dependencies
//
// Config holds the service's settings, taken from the command line. Deps
// (deps.go) is apart from it: the parts the service calls, the engine client,
// the pinner and the node's subsystems, and deps.go declares every interface core
// has of them (Pinner, PreloadWaiter, Network, Checkpoints, LogCopier, Streamer,
// MetricsCollector, NRI, PinKeeper), each naming its implementation. The Service
// keeps Deps as it was given and no other copy of its parts. From the subsystems'
// packages (network, logs, checkpoint, stats) core uses only their types.
//
// KeepPins (pin_keeping.go) is the docker.Client decorator that keeps pins across
// every pull: the pin an image's containerd record carries before a pull is put
// back after it, for kubelet's PullImage and the sandbox image's pull alike.
//
// # NRI relay
//
// The NRI relay (the nri_relay*.go files, apart by name from the NRI runtime in
// package internal/core/nri) calls the plugins through the small NRI interface
// and is a no-op when Deps.NRI is nil. nri_relay.go holds what the relay
// remembers: the sandboxes and containers kept hidden from the CRI until their
// plugins have answered, and the stops already relayed, so that each is relayed
// once. nri_relay_convert.go builds the NRI views of pods and
// containers. nri_relay_create.go is CreateContainer with the plugins'
// adjustments: the container is created first, as asked, then recreated with the
// adjusted config when the engine cannot update it in place. nri_relay_adjust.go
// turns adjustments into the engine's container config, or refuses them as a
// whole. nri_relay_sync.go gives a newly connected plugin the state it is
// synchronised with, applies the plugins' updates and relays the exits of
// containers that end on their own.
package core
