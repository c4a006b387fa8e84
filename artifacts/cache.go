package artifacts

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// DefaultCacheBytes bounds the blob cache of a store from Open.
const DefaultCacheBytes = 64 << 20

// blobCache keeps recently read blobs in memory, least recently used out first, bounded by
// the total bytes it holds rather than by a count (one thread segment can be a few bytes
// and one tool output megabytes). A blob is immutable and its bytes were checked against
// its name before they were added, so a hit never needs the store. Safe for concurrent
// use; the nil cache holds nothing.
type blobCache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	lru   *simplelru.LRU[string, []byte]
}

// newBlobCache returns a cache of at most max bytes, or nil (no cache) when max <= 0.
func newBlobCache(max int64) *blobCache {
	if max <= 0 {
		return nil
	}
	c := &blobCache{max: max}
	// The count bound is out of reach on purpose: bytes bound the cache, enforced in add.
	lru, err := simplelru.NewLRU(math.MaxInt, func(_ string, b []byte) { c.bytes -= int64(len(b)) })
	if err != nil {
		panic(err) // only for a size <= 0
	}
	c.lru = lru
	return c
}

// get returns the cached bytes of blob sum. The caller must not modify them.
func (c *blobCache) get(sum string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(sum)
}

// add caches b as blob sum, evicting the least recently used blobs until the total fits.
// A blob larger than the whole cache is not kept. The cache owns b from now on.
func (c *blobCache) add(sum string, b []byte) {
	if c == nil || int64(len(b)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(sum) {
		c.lru.Get(sum) // same name, same bytes: only refresh its place
		return
	}
	c.lru.Add(sum, b)
	c.bytes += int64(len(b))
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
}

// size returns the number of blobs and bytes held, for tests.
func (c *blobCache) size() (n int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
