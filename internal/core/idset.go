package core

import "sync"

// maxIDs bounds an idSet or idMap: past it the set starts over. What one remembers
// only saves engine calls (see Service.tornDown, Service.created and Service.pids), so
// forgetting is always safe; the bound keeps IDs of containers removed behind our
// back from piling up.
const maxIDs = 10000

// idMap maps engine container IDs to values, safe for concurrent use.
type idMap[V any] struct {
	mu  sync.Mutex
	ids map[string]V
}

func (t *idMap[V]) set(id string, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids == nil || len(t.ids) >= maxIDs {
		t.ids = map[string]V{}
	}
	t.ids[id] = v
}

func (t *idMap[V]) get(id string) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.ids[id]
	return v, ok
}

// forget drops id (its container is removed).
func (t *idMap[V]) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ids, id)
}

// idSet is a set of engine container IDs, safe for concurrent use.
type idSet struct{ idMap[struct{}] }

func (t *idSet) add(id string) { t.set(id, struct{}{}) }

func (t *idSet) has(id string) bool {
	_, ok := t.get(id)
	return ok
}
