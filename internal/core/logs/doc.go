// Package logs owns CRI-format container logs: for each container it follows the
// engine's log stream (docker.Client.ContainerLogs with timestamps) and appends every
// line to the file kubelet asked for, in the CRI log format kubelet, crictl and critest
// read ("<RFC 3339 timestamp> <stdout|stderr> <P|F> <content>"), splitting lines longer
// than a maximum into partial (P) chunks. A Manager runs one copier per container,
// resumes after the last line already in the file when the shim restarts (neither
// losing nor repeating a line), retries with backoff while the engine is unreachable,
// and reopens the file after kubelet rotated it.
//
// The log file chosen for each container at its creation is recorded by records.go,
// one file per container in a directory of our own (cri-dockerd gives it
// <root>/container-logs), so that copies resume to that file after a restart and not
// to a path read back from a container label. open.go opens the file beneath the pod's
// log directory without following symbolic links: with openat2, or, where openat2 is
// missing or refused, a walk of one O_NOFOLLOW open per path component.
package logs
