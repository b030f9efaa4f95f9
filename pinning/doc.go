// Package pinning decides whether an engine image is pinned, so that kubelet's
// image garbage collector keeps it, and records why. It combines the sandbox
// (pod infra) image, the io.cri-containerd.pinned label in image config labels,
// operator patterns (--pinned-images, --pinned-image-labels and a pins file that
// is re-read on SIGHUP) and pluggable sources whose state lives outside the image
// list (containerd record labels, preloaded images). References are compared in
// normalised, fully qualified form, a failing source falls back to its last good
// snapshot instead of unpinning, and the whole state is reported for crictl info.
// The package knows nothing about Docker, gRPC or the CRI services in core.
package pinning
