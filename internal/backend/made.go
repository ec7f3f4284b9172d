package backend

import (
	"slices"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Made is a backend's record of the sandboxes it made and has not yet
// destroyed, by id: what Connect, DestroySandbox and List look up in a
// backend that keeps its sandboxes in process (native, unboxed). T is the
// backend's own sandbox. The zero value is empty and ready; it is safe for
// concurrent use.
type Made[T any] struct {
	mu  sync.Mutex
	ids map[string]T
}

// Add records sb under id.
func (m *Made[T]) Add(id string, sb T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids = map[string]T{}
	}
	m.ids[id] = sb
}

// Get is the sandbox of id; the error, of kind NotFound, says that this
// backend made none by that id or has destroyed it.
func (m *Made[T]) Get(id string) (T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.ids[id]
	if !ok {
		return sb, kiln.Errorf(kiln.NotFound, "no sandbox %q", id)
	}
	return sb, nil
}

// Destroy destroys the sandbox of id with destroy and forgets it once
// destroy succeeds, so that a failed destroy can be retried and the
// sandbox stays listed meanwhile. An id it does not know is already gone:
// not an error.
func (m *Made[T]) Destroy(id string, destroy func(T) error) error {
	sb, err := m.Get(id)
	if err != nil {
		return nil
	}
	if err := destroy(sb); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.ids, id)
	m.mu.Unlock()
	return nil
}

// List is the ids of the sandboxes made and not destroyed, sorted.
func (m *Made[T]) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.ids))
	for id := range m.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
