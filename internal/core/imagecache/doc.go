// Package imagecache keeps an in-memory index of the engine's images so that
// ListImages and ImageStatus answer without calling the engine (which takes
// seconds with the containerd image store). Cache is a docker.Client decorator:
// filled once at start, kept current from the engine's image event stream
// (refreshing only the images an event names, and those whose tags it took),
// reconciled periodically and whenever the stream reconnects. While the first fill
// is under way, and while the stream is down, it answers by calling the engine, as
// if it were not there. Every engine call it makes on its own has a deadline.
//
// An answer never undoes what the index learnt later: an answer the engine gave
// before an event that the index has applied loses to that event, and one older
// than a removal a request saw loses to the removal. A RemoveImage that returned
// leaves its image in no later answer, and so does one that lost a race of
// removals of the same image (it got NotFound, which the CRI answers as success).
// The image disk usage of ImageFsInfo is remembered too and recomputed in the
// background (fsusage.go).
package imagecache
