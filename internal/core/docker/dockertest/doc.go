// Package dockertest provides Fake, an in-memory docker.Client that keeps state so
// that tests of package core check results, not call sequences: images with tags and
// digests, a remote registry to pull from, containers with their states and exit
// events, exec handlers, logs and stats.
//
// Errors can be injected per method (InjectError) or per method and container
// (InjectContainerError), a container can be removed just before a call looks it up
// (RemoveBefore), and the whole engine can be taken down (SetDown) to test outage
// handling.
package dockertest
