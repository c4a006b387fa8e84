package activities

import (
	"fmt"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// The cache of rebuilt threads is bounded by the messages it holds, not only by entries:
// every entry is its own slice, so a long thread must not be kept hundreds of times.
func TestThreadCacheBoundsMessages(t *testing.T) {
	t.Parallel()
	c := newThreadCache()
	long := make([]api.ChatMessage, threadCacheMessages/4)
	for i := 0; i < 10; i++ {
		c.put(fmt.Sprint("h", i), long)
	}
	if c.messages > threadCacheMessages || c.ll.Len() != 4 {
		t.Errorf("cache holds %d entries, %d messages; want at most %d messages", c.ll.Len(), c.messages, threadCacheMessages)
	}
	if _, ok := c.get("h9"); !ok {
		t.Error("the newest thread was evicted")
	}
	if _, ok := c.get("h0"); ok {
		t.Error("the oldest thread is still cached")
	}
	huge := make([]api.ChatMessage, threadCacheMessages*2)
	c.put("huge", huge)
	if _, ok := c.get("huge"); !ok || c.ll.Len() != 1 {
		t.Errorf("a thread over the bound alone: cached %v with %d entries; want it kept as the only one", ok, c.ll.Len())
	}
}
