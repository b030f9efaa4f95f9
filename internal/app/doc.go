// Package app is the cri-dockerd process: upstream-compatible flags and their
// validation, logging, the gRPC server with its one error-converting and logging
// interceptor, unix/tcp/fd:// listeners, sd_notify, and signals (SIGHUP reloads
// pins, SIGTERM stops gracefully). Nothing imports it but main.
package app
