// Package pinning decides whether an engine image is pinned, so that kubelet's
// image garbage collector keeps it, and records why. It combines the sandbox
// (pod infra) image, the io.cri-containerd.pinned label in image config labels,
// operator patterns (--pinned-images), label selectors (--pinned-image-labels),
// a pins file and a pins directory, and pluggable sources whose state lives
// outside the image list (containerd record labels, preloaded images). References
// are compared in normalised, fully qualified form, a failing source falls back to
// its last good snapshot instead of unpinning, and the whole state is reported for
// crictl info. The package knows nothing about Docker's API or the CRI services in
// core: it never imports core nor the Docker SDK, and speaks gRPC only to the
// engine's containerd, in the containerd*.go files (depguard enforces all three).
//
// A host program (our cri-dockerd, or an upstream cri-dockerd patched as in
// patches/) wires pinning in a few lines: Flags.AddFlags registers the pinning
// flags on its pflag.FlagSet, Flags.Validate checks them, Start builds the Setup from
// them, the host's sandbox image and root directory (Host) and an Engine the host
// implements with its own engine client (/info facts, image loads for
// --preload-images-dir). Then Evaluate answers ListImages, Check answers
// ImageStatus, ReloadLogged or ReloadOnSIGHUP re-read the pins files, Info feeds
// verbose Status and KeepPin wraps pulls (--preserve-pin-on-pull). See ExampleStart.
// The host entry point is in the host*.go files: besides the flags and Start, they
// tell from the engine's /info whether it uses containerd's image store and decide
// whether the containerd record-label source runs.
//
// With --preload-images-dir, Start returns at once and keeps the directory's pins
// current in the background: archives are loaded one at a time (skipped when their
// recorded content digest matches and the engine, an ImageChecker, still has their
// images), .txt lists are pinned when read and pulled by an ImagePuller engine, and
// files added or removed while running are loaded or unpinned. The host's ImageStatus
// calls WaitPreloaded for an absent image; restores call ReloadArchiveFor.
//
// # Pins files
//
// The pins file (--pinned-images-file) and the files of the pins directory
// (--pinned-images-dir) hold one pattern a line (file.go). They are re-read on
// SIGHUP and whenever they change (pins_watch.go): inotify watches them, and a
// check every 5 seconds besides covers file systems without inotify. A bad file
// is reported and the previous pins stay in force. openfile.go opens the pins
// files and the preload files as regular files only, never blocking on a FIFO or a
// device put in a file's place (and, in the preload directory, refusing symbolic
// links).
//
// # Never failing open
//
// Each Source gives one snapshot per evaluated list. The last good snapshot of each
// source, the last good pins files and what the preload files pinned are saved under
// Config.StateDir with atomic writes (state.go), and answer while a source cannot,
// across restarts too. With no usable state, Evaluate refuses: its error wraps
// ErrNoPinState and errdefs' Unavailable, rather than list pinned images unpinned.
//
// # Containerd record labels
//
// ContainerdSource reads the pin labels of image records in the engine's containerd
// namespace, with one filtered List call per snapshot (containerd.go), and keeps
// pins across pulls (containerd_keep.go): the engine's pull replaces a record's
// labels, so a pin it removed is put back after the pull.
//
// # Sticky pins
//
// On the containerd image store (sticky*.go), the content of every pinned image is
// held by one containerd lease, dockpin.pinned, which is kept in step with the pins:
// reconciled at start, on image events and periodically, releasing what no pinned
// image needs (except while the content of some pinned image cannot be read: that
// image is skipped and reported, and nothing is released). With
// --restore-pinned-images, a pinned image's record deleted outside the CRI is
// created again from the leased content. The records of preloaded images carry
// preload labels. These files (sticky.go, sticky_walk.go, sticky_preload.go) work
// over ctrdStore, a narrow view of containerd whose gRPC side is containerd_store.go.
//
// On the classic image store, which has no lease to hold content, an Engine that also
// implements the optional ImageWatcher has a pinned image deleted outside the CRI
// noticed: a preloaded one is loaded again, and any other loss is reported
// (sticky_classic.go). On either store, a preloaded image whose content is gone is
// loaded again from its preload file, through Setup.ReloadArchiveFor.
//
// Release (release.go, run by `cri-dockerd pins release`) gives all this back: it
// deletes the lease and the labels pinning set on image records.
//
// # The preload directory
//
// The preload_*.go files keep --preload-images-dir's pins. A watcher
// (preload_watch.go) follows the directory through inotify (fsnotify), debounced,
// with full scans besides, and polls where inotify cannot watch it. It feeds a
// state machine per file (preload_dir.go): a file is processed once its size,
// modification time and inode have held for the settle time; what each file pinned,
// with each archive's sha256, is recorded in the state directory; the pins are
// published to the Pinner at every change; and while files that were in the
// directory at start, with nothing saved for them, are not read yet, Evaluate
// refuses. One background loader (preload_load.go) loads archives, skipping one
// whose digest is the recorded one and whose images the engine still has; the
// references of .txt lists are pulled with backoff (preload_list.go); and
// preload_wait.go holds the bounded wait of ImageStatus (WaitPreloaded) and
// ReloadArchiveFor. The Engine's optional parts ImageChecker and ImagePuller tell
// whether it has an image and pull the listed ones.
package pinning
