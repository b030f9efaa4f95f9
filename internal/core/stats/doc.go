// Package stats owns the CRI metrics of containers and pod sandboxes (the
// ListMetricDescriptors and ListPodSandboxMetrics RPCs): cadvisor-compatible metric
// names and label keys, read from the host's /proc and cgroup files (v2, and v1 or
// hybrid hierarchies) under a configurable root so that tests use a fake tree. It
// never talks to the engine: the caller passes what the engine knows in a Target.
package stats
