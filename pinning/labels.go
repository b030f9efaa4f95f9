package pinning

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// configLabelDetail is the Reason detail of a pin by image config label.
const configLabelDetail = "label " + PinnedLabel + "=" + PinnedValue

// maxWarnedImages bounds the memory of the near-miss warning rate limiter.
const maxWarnedImages = 10000

// labelSelector is one parsed --pinned-image-labels item.
type labelSelector struct {
	key      string
	value    string
	hasValue bool
	detail   string // "label key" or "label key=value"
}

// parseLabelSelector parses "key" (key present, any value) or "key=value" (exact value).
func parseLabelSelector(s string) (labelSelector, error) {
	text := strings.TrimSpace(s)
	key, value, hasValue := strings.Cut(text, "=")
	key = strings.TrimSpace(key)
	if key == "" {
		return labelSelector{}, fmt.Errorf("invalid pinned image label selector %q: empty label key", text)
	}
	sel := labelSelector{key: key, value: strings.TrimSpace(value), hasValue: hasValue}
	sel.detail = "label " + key
	if hasValue {
		sel.detail += "=" + sel.value
	}
	return sel, nil
}

func parseLabelSelectors(texts []string) ([]labelSelector, error) {
	out := make([]labelSelector, 0, len(texts))
	var errs []error
	for _, t := range texts {
		sel, err := parseLabelSelector(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sel)
	}
	return out, errors.Join(errs...)
}

func (s *labelSelector) matches(labels map[string]string) bool {
	v, ok := labels[s.key]
	return ok && (!s.hasValue || v == s.value)
}

func (s *labelSelector) String() string {
	if s.hasValue {
		return s.key + "=" + s.value
	}
	return s.key
}

// hasPinnedLabel reports whether image config labels pin the image.
func hasPinnedLabel(labels map[string]string) bool {
	return labels[PinnedLabel] == PinnedValue
}

// recordPinsByLabel tells whether a containerd image record pins its image by its own
// label: it has the pin label, set by the user and not as a preload mirror (the preload
// pin decides those, so that it ends with its archive), and is not a dangling record
// unless includeDangling. The record-label source and the sticky keeper both count so.
func recordPinsByLabel(name string, labels map[string]string, includeDangling bool) bool {
	if !hasPinnedLabel(labels) || isPreloadMirror(labels) {
		return false
	}
	return includeDangling || !strings.HasPrefix(name, DanglingPrefix)
}

// nearMiss is a config label that looks like a pin but does not count.
type nearMiss struct {
	label string
	value string
	why   string
}

// nearMisses lists labels that an operator probably meant as a pin. It allocates
// only when there is something to report.
func nearMisses(labels map[string]string) []nearMiss {
	var out []nearMiss
	v, ok := labels[PinnedLabel]
	if ok && v != PinnedValue {
		out = append(out, nearMiss{label: PinnedLabel, value: v,
			why: fmt.Sprintf("only the value %q pins an image", PinnedValue)})
	}
	if mv, found := labels[MisspelledLabel]; found && v != PinnedValue {
		out = append(out, nearMiss{label: MisspelledLabel, value: mv,
			why: fmt.Sprintf("misspelled key, the pinning label is %q", PinnedLabel)})
	}
	return out
}

// warnNearMisses logs, at most once per image per interval, why pin-like labels do not pin img.
func warnNearMisses(log logrus.FieldLogger, w *warnLimiter, img *Image, now time.Time) {
	misses := nearMisses(img.Labels)
	if len(misses) == 0 || !w.allow(img.ID, now) {
		return
	}
	for _, m := range misses {
		log.WithFields(logrus.Fields{
			"image": img.ID,
			"ref":   firstRef(img),
			"label": m.label,
			"value": m.value,
			"why":   m.why,
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

// warnLimiter allows one warning per key per interval, with bounded memory.
type warnLimiter struct {
	interval time.Duration
	max      int
	mu       sync.Mutex
	last     map[string]time.Time
}

func newWarnLimiter(interval time.Duration, maxKeys int) *warnLimiter {
	return &warnLimiter{interval: interval, max: maxKeys, last: make(map[string]time.Time)}
}

func (w *warnLimiter) allow(key string, now time.Time) bool {
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
func (w *warnLimiter) prune(now time.Time) {
	for k, t := range w.last {
		if now.Sub(t) >= w.interval {
			delete(w.last, k)
		}
	}
	if len(w.last) >= w.max {
		w.last = make(map[string]time.Time)
	}
}
