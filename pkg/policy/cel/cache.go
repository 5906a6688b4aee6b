package cel

import (
	"runtime"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Cache shares one Program among identical expressions (same text, kind and environment
// type), as policies rendered from one template have. A program takes about 16 KiB of heap,
// so sharing is what keeps a store of thousands of similar policies small. Entries are held
// weakly: a program no policy uses any more is garbage collected and its entry removed.
// Invalid expressions are not cached. A Cache is safe for concurrent use.
type Cache struct {
	env *Env

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
}

type cacheKey struct {
	expression string
	kind       Kind
	envType    environment.Type
}

type cacheEntry struct {
	program  weak.Pointer[Program]
	warnings []string // without field path
}

// NewCache returns an empty cache compiling with env.
func NewCache(env *Env) *Cache {
	return &Cache{env: env, entries: map[cacheKey]cacheEntry{}}
}

// Compile is Env.Compile, returning the cached program when an identical expression was
// compiled before and is still in use.
func (c *Cache) Compile(path *field.Path, expression string, kind Kind, envType environment.Type) (*Program, []string, *field.Error) {
	key := cacheKey{expression: expression, kind: kind, envType: envType}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		if prg := e.program.Value(); prg != nil {
			return prg, prefixWarnings(path, e.warnings), nil
		}
	}
	prg, warnings, detail, err := c.env.compile(expression, kind, envType)
	if err != nil {
		return nil, nil, field.InternalError(path, err)
	}
	if detail != "" {
		return nil, nil, field.Invalid(path, expression, detail)
	}
	wp := weak.Make(prg)
	c.entries[key] = cacheEntry{program: wp, warnings: warnings}
	runtime.AddCleanup(prg, c.evict, cacheEntryRef{key: key, program: wp})
	return prg, prefixWarnings(path, warnings), nil
}

type cacheEntryRef struct {
	key     cacheKey
	program weak.Pointer[Program]
}

// evict removes the entry of a collected program unless it was replaced meanwhile.
func (c *Cache) evict(ref cacheEntryRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[ref.key]; ok && e.program == ref.program {
		delete(c.entries, ref.key)
	}
}

// Len returns the number of cached expressions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
