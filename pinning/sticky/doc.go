// Package sticky keeps pinned images in the engine when something outside the CRI
// deletes them.
//
// On the containerd image store (keeper.go, walk.go, preload.go), the content of
// every pinned image is held by one containerd lease, DefaultLeaseID (or one named after the root directory), kept in step with the
// pins: reconciled at start, on image events and periodically, releasing what no
// pinned image needs (except while the content of some pinned image cannot be read:
// that image is skipped and reported, and nothing is released). With
// --restore-pinned-images, a pinned image's record deleted outside the CRI is
// created again from the leased content. The records of preloaded images carry
// preload labels. It works over containerd.Store.
//
// On the classic image store, which has no lease to hold content, an engine that
// implements ImageWatcher has a pinned image deleted outside the CRI noticed
// (classic.go): a preloaded one is loaded again (Reloader), and any other loss is
// reported.
//
// Release (release.go, run by `cri-dockerd pins release`) gives all this back: it
// deletes the lease and the labels pinning set on image records.
package sticky
