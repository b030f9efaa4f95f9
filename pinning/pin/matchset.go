package pin

// MatchSet is an immutable, ordered list of reference patterns in groups (for the
// Pinner: the sandbox image, --pinned-images, the pins files, the preloaded images).
// A host replaces the whole set, so one evaluation sees one consistent set. Which
// patterns match a reference is remembered on the cached reference (NormRef) per set,
// so a warm evaluation does no string matching.
type MatchSet struct {
	patterns   []Pattern
	ends       []int // ends[g] is the end of group g in patterns
	idPatterns []int // indexes of patterns that can match an image ID
	words      int   // length of a bitmask over patterns
}

// refMemo records the patterns of set that match one reference.
type refMemo struct {
	set    *MatchSet
	bits   []uint64
	inline [1]uint64 // backs bits for sets of up to 64 patterns: one allocation, one cache line
}

// NewMatchSet returns the set of groups, in order.
func NewMatchSet(groups ...[]Pattern) *MatchSet {
	s := &MatchSet{ends: make([]int, len(groups))}
	for g, ps := range groups {
		s.patterns = append(s.patterns, ps...)
		s.ends[g] = len(s.patterns)
	}
	for i := range s.patterns {
		if k := s.patterns[i].kind; k == kindDigest || k == kindBareDigest {
			s.idPatterns = append(s.idPatterns, i)
		}
	}
	s.words = (len(s.patterns) + 63) / 64
	return s
}

// Words is the length of the bitmask Match fills.
func (s *MatchSet) Words() int { return s.words }

// Pattern returns pattern i.
func (s *MatchSet) Pattern(i int) Pattern { return s.patterns[i] }

// Group returns the indexes of group g's patterns: [lo, hi).
func (s *MatchSet) Group(g int) (lo, hi int) {
	if g > 0 {
		lo = s.ends[g-1]
	}
	return lo, s.ends[g]
}

// refBits returns the patterns of s matching r, computing them once per set.
func (s *MatchSet) refBits(r *NormRef) []uint64 {
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

// Match fills bits (len Words) with the patterns matching an image of that ID and
// references; it reports whether any did.
func (s *MatchSet) Match(id string, refs []*NormRef, bits []uint64) bool {
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

// HasBit tells whether pattern i is set in bits.
func HasBit(bits []uint64, i int) bool {
	return bits[i/64]&(1<<(i%64)) != 0
}
