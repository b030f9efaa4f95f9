// Package logs owns CRI-format container logs: for each container it follows the
// engine's log stream (docker.Client.ContainerLogs with timestamps) and appends every
// line to the file kubelet asked for, in the CRI log format kubelet, crictl and critest
// read ("<RFC 3339 timestamp> <stdout|stderr> <P|F> <content>"), splitting lines longer
// than a maximum into partial (P) chunks. A Manager runs one copier per container,
// resumes after the last line already in the file when the shim restarts, retries with
// backoff while the engine is unreachable, and reopens the file after kubelet rotated it.
package logs
