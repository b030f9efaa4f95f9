// Package pinner decides whether images are pinned and why. A Pinner combines the
// sandbox image, config labels, --pinned-images, label selectors, the pins files
// (reloaded on demand; a bad file keeps the previous pins), the preload directory's
// references (published by package preload through SetPreloaded) and pluggable
// Sources whose state lives outside the image list.
//
// It never fails open. Each Source gives one snapshot per evaluated list; the last
// good snapshot of each source, the last good pins files and what the preload files
// pinned are saved under Config.StateDir (statefile), and answer while a source
// cannot, across restarts too. With no usable state, Evaluate refuses: its error
// wraps pin.ErrNoPinState and errdefs' Unavailable, rather than list pinned images
// unpinned. Info and Health report the whole state (crictl info, /metrics).
package pinner
