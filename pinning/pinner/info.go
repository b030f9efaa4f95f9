package pinner

import (
	"time"

	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// evalStats summarises the most recent Evaluate call. It is immutable.
type evalStats struct {
	at       time.Time
	images   int
	pinned   int
	bySource map[string]int // images with at least one reason of the source
}

func newEvalStats(at time.Time, results [][]pin.Reason) *evalStats {
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

func seenSource(rs []pin.Reason, source string) bool {
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
		"preloaded":      p.PreloadedNow(),
		"preloadUnread":  p.PreloadUnread(),
		"sources":        p.sourcesInfo(now),
		"lastEvaluation": p.evalInfo(),
	}
}

func (p *Pinner) pinsFileInfo() map[string]any {
	info := map[string]any{"path": p.cfg.PinsFile, "dir": p.cfg.PinsDir, "patterns": []string{}}
	if f := p.set.Load().file; f != nil {
		info["patterns"] = patternTexts(f.patterns)
		info["loadedAt"] = pin.FormatTime(f.loadedAt)
		info["restored"] = f.restored
	}
	if st := p.fileStatus.Load(); st != nil {
		info["lastAttempt"] = pin.FormatTime(st.attemptAt)
		info["files"] = append([]string{}, st.files...)
		info["lastError"] = pin.ErrString(st.err)
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
		"time":     pin.FormatTime(st.at),
		"images":   st.images,
		"pinned":   st.pinned,
		"bySource": bySource,
	}
}

func patternTexts(ps []pin.Pattern) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].String()
	}
	return out
}

func selectorTexts(sels []pin.LabelSelector) []string {
	out := make([]string, len(sels))
	for i := range sels {
		out[i] = sels[i].String()
	}
	return out
}
