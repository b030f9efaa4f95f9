package pinning

import (
	"context"
	"errors"
	"io"
	"sync"
)

// fakeEngine is an Engine that knows some archives (by content) and what loading
// each loads; it keeps what was loaded.
type fakeEngine struct {
	info     EngineInfo
	infoErr  error
	archives map[string][]string // content -> references loaded

	mu     sync.Mutex
	loaded []string // contents loaded, in order
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{info: EngineInfo{Driver: "overlay2"}, archives: map[string][]string{}}
}

func (e *fakeEngine) EngineInfo(context.Context) (EngineInfo, error) { return e.info, e.infoErr }

func (e *fakeEngine) LoadImages(_ context.Context, archive io.Reader) ([]string, error) {
	b, err := io.ReadAll(archive)
	if err != nil {
		return nil, err
	}
	refs, ok := e.archives[string(b)]
	if !ok {
		return nil, errors.New("load images: invalid archive")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loaded = append(e.loaded, string(b))
	return refs, nil
}

func (e *fakeEngine) loadedArchives() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.loaded...)
}
