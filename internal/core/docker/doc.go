// Package docker owns the narrow, context-first Client interface that the CRI
// service in package core needs from Docker Engine, and the only adapter over
// the Docker SDK. The adapter translates SDK types into the small value types
// below and classifies every SDK error into a containerd errdefs kind
// (NotFound, InvalidArgument, Unavailable, ...), so that callers never look at
// error strings and the gRPC layer can convert kinds to codes in one place.
//
// It is the one package that may import the Docker SDK (depguard enforces it).
// The adapter, SDKClient, has a file per job: sdk.go (the client, version and
// /info), sdk_image.go (images and their events), sdk_container.go (the
// containers' lifecycle), sdk_container_spec.go (the mapping of a ContainerSpec,
// which core builds from the CRI's config, onto the engine's container config),
// sdk_stream.go (exec and attach over one relay of the hijacked session),
// sdk_kill_linux.go (the kill of an exec's process, pinned with a pidfd and
// checked to be in the container's cgroup before it is signalled), sdk_stats.go,
// and sdk_events.go (containers' exits, for NRI). errors.go classifies SDK errors
// into errdefs kinds, once; the one place that reads an error's text is there,
// for the engine's pull progress stream, which carries only text.
package docker
