// Package network owns pod networking through CNI (libcni): it loads the first usable
// network configuration from --cni-conf-dir (reloading it when the files change), reports
// whether pod networking is ready, attaches a sandbox's network namespace (loopback, then
// the configured network list as eth0 with the portMappings, bandwidth, ipRanges and dns
// capability arguments), detaches it idempotently using libcni's result cache, and reads a
// sandbox's IPs back from that cache, so they survive a restart of the shim. It knows
// nothing about Docker: the caller passes the sandbox ID and its network namespace path.
//
// Teardown deletes with the configuration and arguments recorded in libcni's cache at
// attachment, so a configuration changed or removed since does not leak addresses; it
// works without the network namespace (one that is gone is passed as empty, as the CNI
// spec allows for DEL), and tearing down twice, or a sandbox never set up, succeeds.
package network
