package core

import (
	"maps"
	"strings"
)

// Labels cri-dockerd puts on the engine's containers, as upstream.
const (
	labelContainerType = "io.kubernetes.docker.type"
	typeSandbox        = "podsandbox"
	typeContainer      = "container"
	labelContainerName = "io.kubernetes.container.name"
	labelLogPath       = "io.kubernetes.container.logpath"
	labelSandboxID     = "io.kubernetes.sandbox.id"
	annotationPrefix   = "annotation."

	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodUID       = "io.kubernetes.pod.uid"
)

// annotationShimGroup is the OCI annotation by which containerd's runc shim serves
// containers of one pod from one shim process (containerd's CRI sets it; the shim
// knows it as the CRI sandbox ID).
const annotationShimGroup = "io.kubernetes.cri.sandbox-id"

// labelSubPathCheck marks the short-lived, never started container that checks an image
// volume's image_sub_path (checkImageSubPath); its value is the mount's target. It is
// ours, not upstream's: no CRI listing shows such a container.
const labelSubPathCheck = "io.dockpin.image-subpath-check"

// internalLabels are ours; they are stripped when labels go back through the CRI.
var internalLabels = map[string]bool{
	labelContainerType: true,
	labelLogPath:       true,
	labelSandboxID:     true,
}

// makeLabels merges the CRI labels and annotations into engine labels: labels
// verbatim, each annotation as "annotation.<key>".
func makeLabels(labels, annotations map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+len(annotations)+4)
	maps.Copy(out, labels)
	for k, v := range annotations {
		out[annotationPrefix+k] = v
	}
	return out
}

// splitLabels is makeLabels' inverse: it returns the CRI labels and annotations of
// engine labels, without the internal ones.
func splitLabels(engine map[string]string) (labels, annotations map[string]string) {
	labels = map[string]string{}
	annotations = map[string]string{}
	for k, v := range engine {
		switch {
		case internalLabels[k]:
		case strings.HasPrefix(k, annotationPrefix):
			annotations[strings.TrimPrefix(k, annotationPrefix)] = v
		default:
			labels[k] = v
		}
	}
	return labels, annotations
}
