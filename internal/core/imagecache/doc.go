// Package imagecache keeps an in-memory index of the engine's images so that
// ListImages and ImageStatus answer without calling the engine (which takes
// seconds with the containerd image store). Cache is a docker.Client decorator:
// filled once at start, kept current from the engine's image event stream
// (refreshing only the images an event names, and those whose tags it took),
// reconciled periodically and whenever the stream reconnects. While the first fill
// is under way, and while the stream is down, it answers by calling the engine, as
// if it were not there. Every engine call it makes on its own has a deadline.
package imagecache
