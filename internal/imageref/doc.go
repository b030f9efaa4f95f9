// Package imageref owns image-reference normalisation: how "busybox",
// "docker.io/library/busybox:latest" and "index.docker.io/library/busybox" come to
// be one name, as the engine resolves them. Pinning, the containerd record source,
// the image cache, the engine fake and the credentials lookup all normalise through
// it, so they agree on what a reference names.
package imageref
