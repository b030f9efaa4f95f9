package core

import "sync"

// maxIDs bounds an idSet: past it the set starts over. What a set remembers only
// saves engine calls (see Service.tornDown and Service.created), so forgetting is
// always safe; the bound keeps IDs of containers removed behind our back from
// piling up.
const maxIDs = 10000

// idSet is a set of engine container IDs, safe for concurrent use.
type idSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (t *idSet) add(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids == nil || len(t.ids) >= maxIDs {
		t.ids = map[string]struct{}{}
	}
	t.ids[id] = struct{}{}
}

func (t *idSet) has(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.ids[id]
	return ok
}

// forget drops id (its container is removed).
func (t *idSet) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ids, id)
}
