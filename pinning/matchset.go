package pinning

// matchSet is the immutable, ordered list of every reference pattern in force: the
// sandbox image, then --pinned-images, then the pins file, then preloaded images. Reload replaces the whole
// set, so one Evaluate sees one consistent set. Which patterns match a reference is
// remembered on the cached reference per set, so a warm Evaluate does no string matching.
type matchSet struct {
	patterns    []Pattern
	sandboxEnd  int            // patterns[:sandboxEnd] is the sandbox image
	patternsEnd int            // patterns[sandboxEnd:patternsEnd] are --pinned-images
	fileEnd     int            // patterns[patternsEnd:fileEnd] are the pins file's; the rest preloaded images
	idPatterns  []int          // indexes of patterns that can match an image ID
	words       int            // length of a bitmask over patterns
	file        *pinsFileState // the pins file in force; nil without one
	preload     []Pattern      // the preloaded images' patterns in force (patterns[fileEnd:])
}

// refMemo records the patterns of set that match one reference.
type refMemo struct {
	set    *matchSet
	bits   []uint64
	inline [1]uint64 // backs bits for sets of up to 64 patterns: one allocation, one cache line
}

func newMatchSet(r *rules, file *pinsFileState, preload []Pattern) *matchSet {
	s := &matchSet{file: file, preload: preload}
	if r.sandbox != nil {
		s.patterns = append(s.patterns, *r.sandbox)
	}
	s.sandboxEnd = len(s.patterns)
	s.patterns = append(s.patterns, r.patterns...)
	s.patternsEnd = len(s.patterns)
	if file != nil {
		s.patterns = append(s.patterns, file.patterns...)
	}
	s.fileEnd = len(s.patterns)
	s.patterns = append(s.patterns, preload...)
	for i := range s.patterns {
		if k := s.patterns[i].kind; k == kindDigest || k == kindBareDigest {
			s.idPatterns = append(s.idPatterns, i)
		}
	}
	s.words = (len(s.patterns) + 63) / 64
	return s
}

// refBits returns the patterns of s matching r, computing them once per set.
func (s *matchSet) refBits(r *normRef) []uint64 {
	if m := r.memo.Load(); m != nil && m.set == s {
		return m.bits
	}
	m := &refMemo{set: s}
	if s.words <= len(m.inline) {
		m.bits = m.inline[:s.words]
	} else {
		m.bits = make([]uint64, s.words)
	}
	for i := range s.patterns {
		if s.patterns[i].matchesRef(r) {
			m.bits[i/64] |= 1 << (i % 64)
		}
	}
	r.memo.Store(m)
	return m.bits
}

// match fills bits (len s.words) with the patterns matching an image; it reports
// whether any did.
func (s *matchSet) match(id string, refs []*normRef, bits []uint64) bool {
	clear(bits)
	var found uint64
	for _, r := range refs {
		for w, b := range s.refBits(r) {
			bits[w] |= b
			found |= b
		}
	}
	for _, i := range s.idPatterns {
		if s.patterns[i].matchesID(id) {
			bits[i/64] |= 1 << (i % 64)
			found = 1
		}
	}
	return found != 0
}

func hasBit(bits []uint64, i int) bool {
	return bits[i/64]&(1<<(i%64)) != 0
}
