// Package pin is the vocabulary of image pinning, below every other pinning
// package: the Image a decision looks at and the Reason it gives; the Source and
// Matcher a pin source implements (and SnapshotCodec to save its snapshots); the
// reference patterns of --pinned-images and the pins files (Pattern, in normalised,
// fully qualified form, with a cache of normalised references and MatchSet, an
// ordered set of patterns whose matches are remembered per reference); label
// selectors and near-miss warnings; the pins file format (one pattern a line,
// CheckPins); and the labels of containerd image records that pinning reads and
// writes (PinnedLabel, the preload labels, DanglingPrefix). It imports no other
// pinning package but internal/statefile.
package pin
