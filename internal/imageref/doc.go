// Package imageref owns image-reference normalisation: how "busybox",
// "docker.io/library/busybox:latest" and "index.docker.io/library/busybox" come to
// be one name, as the engine resolves them. Pinning, the containerd record source,
// the image cache, the engine fake and the credentials lookup all normalise through
// it, so they agree on what a reference names; it is the one place that does.
//
// Parse accepts the familiar forms and refuses the engine's "<none>" placeholders
// (ErrNone); Normalize gives the fully qualified form of a reference; Resolved gives
// the reference the engine resolves it to, ":latest" added when it has neither tag
// nor digest, which is the name of the engine's tag and of its containerd record;
// Check tells whether a string names an image the engine can look up (a reference,
// or an image ID). The package imports only distribution/reference: a leaf that every
// package of this module may import (depguard keeps core and pinning out of it).
package imageref
