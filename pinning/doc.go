// Package pinning is the entry point of image pinning for a host program: our
// cri-dockerd, or an upstream cri-dockerd patched as in patches/. It decides whether
// an engine image is pinned, so that kubelet's image garbage collector keeps it, and
// records why: the sandbox (pod infra) image, the io.cri-containerd.pinned label in
// image config labels, operator patterns (--pinned-images), label selectors
// (--pinned-image-labels), a pins file and a pins directory, the pin labels of the
// engine's containerd image records, and the preload directory's images.
//
// A host wires pinning in a few lines: Flags.AddFlags registers the pinning flags on
// its pflag.FlagSet, Flags.Validate checks them, Start builds the Setup from them, the
// host's sandbox image and root directory (Host) and an Engine the host implements
// with its own engine client (/info facts, image loads for --preload-images-dir).
// Then Evaluate answers ListImages, Check answers ImageStatus, ReloadLogged or
// ReloadOnSIGHUP re-read the pins files, Info feeds verbose Status and KeepPin wraps
// pulls (--preserve-pin-on-pull). See ExampleStart. Release (`cri-dockerd pins
// release`) gives back what pinning holds in the engine.
//
// This package only wires its sub-packages, one per job; a host needs nothing else,
// and the names it uses are aliased here (aliases.go):
//
//   - pin: the vocabulary (Image, Reason, the Source and Matcher a pin source
//     implements, reference patterns and their matching, label selectors, the pins
//     file format, the record labels pinning reads and writes).
//   - pinner: the Pinner, which decides for a list of images from every source,
//     never failing open (last good state, saved across restarts), and reports its
//     state (Info, Health).
//   - containerd: the record-label source over the engine's containerd namespace,
//     pin keeping across pulls, and the narrow containerd view (Store) the sticky
//     keeper works over. It is the only package that speaks containerd's gRPC API.
//   - preload: the preload directory (--preload-images-dir): watch, load, lists,
//     bounded waits; it publishes its pins to the Pinner.
//   - sticky: the keepers that hold pinned images (a containerd lease on the
//     containerd image store; reloads and reports on the classic one), and Release.
//   - internal/statefile: atomic state files and the opening of regular files.
//
// Here: the flags (host.go), Start and the Setup (host_start.go, host_setup.go), the
// containerd source's on/off decision from /info (host_containerd.go), the pins
// files' watcher (pins_watch.go: inotify, and a check every 5 seconds besides; a bad
// file keeps the previous pins), and Release's engine side (release.go).
package pinning
