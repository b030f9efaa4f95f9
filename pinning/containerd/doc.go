// Package containerd is pinning's side of the engine's containerd namespace, and the
// only pinning package that speaks containerd's gRPC API. Source reads the pin labels
// of image records with one filtered List call per snapshot (source.go) and keeps
// pins across pulls (keep.go): the engine's pull replaces a record's labels, so a
// pin it removed is put back after the pull. Store (store.go) is the narrow view of
// the namespace that the sticky keeper works over: records, content, one lease and
// the image events.
package containerd
