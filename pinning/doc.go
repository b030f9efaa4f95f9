// Package pinning decides whether an engine image is pinned, so that kubelet's
// image garbage collector keeps it, and records why. It combines the sandbox
// (pod infra) image, the io.cri-containerd.pinned label in image config labels,
// operator patterns (--pinned-images, --pinned-image-labels and a pins file that
// is re-read on SIGHUP) and pluggable sources whose state lives outside the image
// list (containerd record labels, preloaded images). References are compared in
// normalised, fully qualified form, a failing source falls back to its last good
// snapshot instead of unpinning, and the whole state is reported for crictl info.
// The package knows nothing about Docker, gRPC or the CRI services in core.
//
// A host program (our cri-dockerd, or an upstream cri-dockerd patched as in
// patches/) wires pinning in a few lines: Flags.AddFlags registers the pinning
// flags on its pflag.FlagSet, Flags.Validate checks them, Start builds the Setup from
// them, the host's sandbox image and root directory (Host) and an Engine the host
// implements with its own engine client (/info facts, image loads for
// --preload-images-dir). Then Evaluate answers ListImages, Check answers
// ImageStatus, ReloadLogged or ReloadOnSIGHUP re-read the pins file, Info feeds
// verbose Status and KeepPin wraps pulls (--preserve-pin-on-pull). See ExampleStart.
//
// With --preload-images-dir, Start returns at once and keeps the directory's pins
// current in the background: archives are loaded one at a time (skipped when their
// recorded content digest matches and the engine, an ImageChecker, still has their
// images), .txt lists are pinned when read and pulled by an ImagePuller engine, and
// files added or removed while running are loaded or unpinned. The host's ImageStatus
// calls WaitPreloaded for an absent image; restores call ReloadArchiveFor.
package pinning
