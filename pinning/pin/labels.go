package pin

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// ConfigLabelDetail is the Reason detail of a pin by image config label.
const ConfigLabelDetail = "label " + PinnedLabel + "=" + PinnedValue

// MaxWarnedImages bounds the memory of the near-miss warning rate limiter.
const MaxWarnedImages = 10000

// LabelSelector is one parsed --pinned-image-labels item.
type LabelSelector struct {
	key      string
	value    string
	hasValue bool
	detail   string // "label key" or "label key=value"
}

// ParseLabelSelector parses "key" (key present, any value) or "key=value" (exact value).
func ParseLabelSelector(s string) (LabelSelector, error) {
	text := strings.TrimSpace(s)
	key, value, hasValue := strings.Cut(text, "=")
	key = strings.TrimSpace(key)
	if key == "" {
		return LabelSelector{}, fmt.Errorf("invalid pinned image label selector %q: empty label key", text)
	}
	sel := LabelSelector{key: key, value: strings.TrimSpace(value), hasValue: hasValue}
	sel.detail = "label " + key
	if hasValue {
		sel.detail += "=" + sel.value
	}
	return sel, nil
}

// ParseLabelSelectors parses --pinned-image-labels; the error names every bad item.
func ParseLabelSelectors(texts []string) ([]LabelSelector, error) {
	return parseAll(texts, ParseLabelSelector)
}

// Matches tells whether labels match the selector.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	v, ok := labels[s.key]
	return ok && (!s.hasValue || v == s.value)
}

// Detail is the Reason detail of a pin by the selector: "label key" or "label key=value".
func (s *LabelSelector) Detail() string { return s.detail }

// String is the selector as given: "key" or "key=value".
func (s *LabelSelector) String() string {
	if s.hasValue {
		return s.key + "=" + s.value
	}
	return s.key
}

// HasPinnedLabel reports whether image config labels pin the image.
func HasPinnedLabel(labels map[string]string) bool {
	return labels[PinnedLabel] == PinnedValue
}

// RecordPinsByLabel tells whether a containerd image record pins its image by its own
// label: it has the pin label, set by the user and not as a preload mirror (the preload
// pin decides those, so that it ends with its archive), and is not a dangling record
// unless includeDangling. The record-label source and the sticky keeper both count so.
func RecordPinsByLabel(name string, labels map[string]string, includeDangling bool) bool {
	if !HasPinnedLabel(labels) || IsPreloadMirror(labels) {
		return false
	}
	return includeDangling || !strings.HasPrefix(name, DanglingPrefix)
}

// NearMiss is a config label that looks like a pin but does not count.
type NearMiss struct {
	Label string
	Value string
	Why   string
}

// NearMisses lists labels that an operator probably meant as a pin. It allocates
// only when there is something to report.
func NearMisses(labels map[string]string) []NearMiss {
	var out []NearMiss
	v, ok := labels[PinnedLabel]
	if ok && v != PinnedValue {
		out = append(out, NearMiss{Label: PinnedLabel, Value: v,
			Why: fmt.Sprintf("only the value %q pins an image", PinnedValue)})
	}
	if mv, found := labels[MisspelledLabel]; found && v != PinnedValue {
		out = append(out, NearMiss{Label: MisspelledLabel, Value: mv,
			Why: fmt.Sprintf("misspelled key, the pinning label is %q", PinnedLabel)})
	}
	return out
}

// WarnNearMisses logs, at most once per image per interval, why pin-like labels do not pin img.
func WarnNearMisses(log logrus.FieldLogger, w *WarnLimiter, img *Image, now time.Time) {
	misses := NearMisses(img.Labels)
	if len(misses) == 0 || !w.Allow(img.ID, now) {
		return
	}
	for _, m := range misses {
		log.WithFields(logrus.Fields{
			"image": img.ID,
			"ref":   firstRef(img),
			"label": m.Label,
			"value": m.Value,
			"why":   m.Why,
		}).Warn("image config label does not pin the image")
	}
}

// firstRef names an image for humans: its first real tag, else its first digest.
func firstRef(img *Image) string {
	for _, refs := range [][]string{img.RepoTags, img.RepoDigests} {
		for _, r := range refs {
			if !strings.Contains(r, "<none>") {
				return r
			}
		}
	}
	return ""
}

// WarnLimiter allows one warning per key per interval, with bounded memory.
type WarnLimiter struct {
	interval time.Duration
	max      int
	mu       sync.Mutex
	last     map[string]time.Time
}

// NewWarnLimiter allows one warning per key per interval, remembering at most max keys.
func NewWarnLimiter(interval time.Duration, maxKeys int) *WarnLimiter {
	return &WarnLimiter{interval: interval, max: maxKeys, last: make(map[string]time.Time)}
}

// Allow tells whether a warning about key may be logged now, and records it.
func (w *WarnLimiter) Allow(key string, now time.Time) bool {
	if w.interval <= 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[key]; ok && now.Sub(t) < w.interval {
		return false
	}
	if len(w.last) >= w.max {
		w.prune(now)
	}
	w.last[key] = now
	return true
}

// prune forgets expired keys, and everything if that is not enough. Caller holds mu.
func (w *WarnLimiter) prune(now time.Time) {
	for k, t := range w.last {
		if now.Sub(t) >= w.interval {
			delete(w.last, k)
		}
	}
	if len(w.last) >= w.max {
		w.last = make(map[string]time.Time)
	}
}
