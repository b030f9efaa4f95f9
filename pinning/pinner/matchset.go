package pinner

import "github.com/dockpin/cri-dockerd/pinning/pin"

// The groups of a matchSet, in order.
const (
	groupSandbox  = iota // the sandbox image
	groupPatterns        // --pinned-images
	groupFile            // the pins files
	groupPreload         // the preloaded images
)

// matchSet is the set of every reference pattern in force, with the pins files it
// holds. Reload replaces the whole set, so one Evaluate sees one consistent set.
type matchSet struct {
	*pin.MatchSet
	file    *pinsFileState // the pins file in force; nil without one
	preload []pin.Pattern  // the preloaded images' patterns in force (group groupPreload)
}

func newMatchSet(r *rules, file *pinsFileState, preload []pin.Pattern) *matchSet {
	var sandbox, filePatterns []pin.Pattern
	if r.sandbox != nil {
		sandbox = []pin.Pattern{*r.sandbox}
	}
	if file != nil {
		filePatterns = file.patterns
	}
	return &matchSet{MatchSet: pin.NewMatchSet(sandbox, r.patterns, filePatterns, preload), file: file, preload: preload}
}
