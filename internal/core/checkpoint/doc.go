// Package checkpoint owns the pod sandbox checkpoint files that cri-dockerd keeps
// at <root>/sandbox/<sandbox id>: their JSON layout, the FNV-1a checksum over a
// go-spew style rendering of the checkpoint data, and an atomic file store. The
// bytes and the checksum match upstream cri-dockerd exactly in both directions, so
// an operator can switch between the two binaries without either one treating the
// other's checkpoints as corrupt and deleting them.
//
// A write is atomic: a synced temporary file in the same directory, mode 0600
// (renameio), renamed over the checkpoint, then a sync of the directory.
package checkpoint
