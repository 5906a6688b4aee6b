package policy

// Snapshot is an immutable view of every accepted policy, indexed for resolution. Readers
// get it from Store.Snapshot without a lock; writers replace it whole.
type Snapshot struct {
	rootNamespace string
	namespaces    map[string]*namespaceIndex
	size          int
	// superseded is closed when the store publishes the snapshot that replaces this one.
	superseded chan struct{}
}

// Superseded returns a channel that is closed once the store has published a newer
// snapshot (a policy was compiled or removed). A reader that loads a snapshot, works from
// it and then waits on its channel never misses a change: the webhook configuration
// controller recomputes the synchronous network types this way.
func (s *Snapshot) Superseded() <-chan struct{} { return s.superseded }

// Len returns the number of policies in the snapshot.
func (s *Snapshot) Len() int { return s.size }

// namespaceIndex holds the accepted policies of one namespace by spec.plugins entry.
type namespaceIndex struct {
	// byPlugin maps a plugin name or alias to the policies listing it, by namespace/name.
	byPlugin map[string][]*CompiledPolicy
	// wildcard are the policies listing "*".
	wildcard []*CompiledPolicy
	size     int
}

func newNamespaceIndex(policies map[string]*CompiledPolicy) *namespaceIndex {
	idx := &namespaceIndex{byPlugin: map[string][]*CompiledPolicy{}}
	for _, p := range policies {
		idx.size++
		for _, entry := range p.plugins {
			if entry == "*" {
				idx.wildcard = append(idx.wildcard, p)
				continue
			}
			idx.byPlugin[entry] = append(idx.byPlugin[entry], p)
		}
	}
	return idx
}

// with returns a copy of s in which namespace ns has index idx (nil removes it).
func (s *Snapshot) with(ns string, idx *namespaceIndex) *Snapshot {
	next := &Snapshot{rootNamespace: s.rootNamespace, namespaces: make(map[string]*namespaceIndex, len(s.namespaces)+1), size: s.size,
		superseded: make(chan struct{})}
	for k, v := range s.namespaces {
		next.namespaces[k] = v
	}
	if old := s.namespaces[ns]; old != nil {
		next.size -= old.size
	}
	if idx == nil || idx.size == 0 {
		delete(next.namespaces, ns)
	} else {
		next.namespaces[ns] = idx
		next.size += idx.size
	}
	return next
}
