package activities_test

import (
	"context"
	"sync"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Concurrent first uses of a run's sandbox get the one sandbox, made once.
func TestSandboxesOpenConcurrentlyMakesOne(t *testing.T) {
	sbs, err := activities.NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := api.SandboxSpec{Type: api.SandboxVirtual}
	got := make([]sandbox.Sandbox, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			sb, err := sbs.Open(context.Background(), "run-1", spec)
			if err != nil {
				t.Error(err)
			}
			got[i] = sb
		})
	}
	wg.Wait()
	for i, sb := range got {
		if sb == nil || sb != got[0] {
			t.Fatalf("Open %d returned %p, Open 0 %p: want one sandbox for the run", i, sb, got[0])
		}
	}
	other, err := sbs.Open(context.Background(), "run-2", spec)
	if err != nil || other == got[0] {
		t.Fatalf("another run's Open = %p, %v; want its own sandbox", other, err)
	}
}
