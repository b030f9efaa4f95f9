// Package stats owns the CRI metrics of containers and pod sandboxes (the
// ListMetricDescriptors and ListPodSandboxMetrics RPCs): cadvisor-compatible metric
// names and label keys, read from the host's /proc and cgroup files (v2, and v1 or
// hybrid hierarchies) under a configurable root so that tests use a fake tree. It
// never talks to the engine: the caller passes what the engine knows in a Target.
// It imports no Docker SDK, only the standard library, errdefs, cri-api and
// golang.org/x/sys/unix.
package stats
