package network

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestConcurrentSetUp(t *testing.T) {
	e := newListEnv(t)
	m := e.manager(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pn := testPod(t, fmt.Sprintf("sb%d", i))
			if _, err := m.SetUp(ctx, pn); err != nil {
				errs <- err
				return
			}
			if err := m.Status(ctx); err != nil {
				errs <- err
			}
			if err := m.SetPodCIDR(fmt.Sprintf("10.%d.0.0/16", i)); err != nil {
				errs <- err
			}
			if _, err := m.PodNetworkStatus(ctx, pn.SandboxID); err != nil {
				errs <- err
			}
			if err := m.TearDown(ctx, pn); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
