// Package docker owns the narrow, context-first Client interface that the CRI
// service in package core needs from Docker Engine, and the only adapter over
// the Docker SDK. The adapter translates SDK types into the small value types
// below and classifies every SDK error into a containerd errdefs kind
// (NotFound, InvalidArgument, Unavailable, ...), so that callers never look at
// error strings and the gRPC layer can convert kinds to codes in one place.
package docker
