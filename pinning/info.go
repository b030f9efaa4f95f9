package pinning

import (
	"time"
)

// evalStats summarises the most recent Evaluate call. It is immutable.
type evalStats struct {
	at       time.Time
	images   int
	pinned   int
	bySource map[string]int // images with at least one reason of the source
}

func newEvalStats(at time.Time, results [][]Reason) *evalStats {
	st := &evalStats{at: at, images: len(results), bySource: make(map[string]int)}
	for _, reasons := range results {
		if len(reasons) == 0 {
			continue
		}
		st.pinned++
		for i, r := range reasons {
			if !seenSource(reasons[:i], r.Source) {
				st.bySource[r.Source]++
			}
		}
	}
	return st
}

func seenSource(rs []Reason, source string) bool {
	for _, r := range rs {
		if r.Source == source {
			return true
		}
	}
	return false
}

// Info returns the JSON-serialisable pinning configuration and state for crictl info:
// the configuration, the pins file, every extra source, and the most recent Evaluate.
func (p *Pinner) Info() map[string]any {
	now := p.now()
	return map[string]any{
		"sandboxImage":   p.cfg.SandboxImage,
		"configLabels":   p.cfg.ConfigLabels,
		"patterns":       patternTexts(p.rules.patterns),
		"labelSelectors": selectorTexts(p.rules.selectors),
		"maxStaleness":   p.cfg.MaxStaleness.String(),
		"snapshotTTL":    p.cfg.SnapshotTTL.String(),
		"warnInterval":   p.cfg.WarnInterval.String(),
		"pinsFile":       p.pinsFileInfo(),
		"preloaded":      p.preloadedNow(),
		"sources":        p.sourcesInfo(now),
		"lastEvaluation": p.evalInfo(),
	}
}

func (p *Pinner) pinsFileInfo() map[string]any {
	info := map[string]any{"path": p.cfg.PinsFile, "dir": p.cfg.PinsDir, "patterns": []string{}}
	if f := p.set.Load().file; f != nil {
		info["patterns"] = patternTexts(f.patterns)
		info["loadedAt"] = formatTime(f.loadedAt)
		info["restored"] = f.restored
	}
	if st := p.fileStatus.Load(); st != nil {
		info["lastAttempt"] = formatTime(st.attemptAt)
		info["files"] = append([]string{}, st.files...)
		info["lastError"] = errString(st.err)
	}
	return info
}

func (p *Pinner) sourcesInfo(now time.Time) []map[string]any {
	srcs := p.loadSources()
	out := make([]map[string]any, 0, len(srcs))
	for _, s := range srcs {
		out = append(out, s.status(now))
	}
	return out
}

func (p *Pinner) evalInfo() map[string]any {
	st := p.lastEval.Load()
	if st == nil {
		return map[string]any{}
	}
	bySource := make(map[string]int, len(st.bySource))
	for k, v := range st.bySource {
		bySource[k] = v
	}
	return map[string]any{
		"time":     formatTime(st.at),
		"images":   st.images,
		"pinned":   st.pinned,
		"bySource": bySource,
	}
}

func patternTexts(ps []Pattern) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].text
	}
	return out
}

func selectorTexts(sels []labelSelector) []string {
	out := make([]string, len(sels))
	for i := range sels {
		out[i] = sels[i].String()
	}
	return out
}

// formatTime renders t for Info; "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
