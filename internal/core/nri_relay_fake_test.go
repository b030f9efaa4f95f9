package core

import (
	"context"
	"fmt"
	"sync"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
)

// fakeNRI is a stateful stand-in for the NRI plugins: it records each event with the
// object's ID, fails an event once when told to, answers CreateContainer with
// adjust's adjustment, and runs during an event what a test wants to observe then.
type fakeNRI struct {
	mu     sync.Mutex
	events []string                                                // "Event id"
	fail   map[string]error                                        // event → error, consumed once
	adjust func(ctr *nriapi.Container) *nriapi.ContainerAdjustment // nil: no adjustment
	during map[string]func(id string)                              // event → run while it is handled
	synced int                                                     // BlockSync holders
	sig    chan struct{}                                           // closed and replaced on each event
}

func newFakeNRI() *fakeNRI {
	return &fakeNRI{fail: map[string]error{}, during: map[string]func(string){}, sig: make(chan struct{})}
}

// withNRI builds the test service with plugins f.
func withNRI(f *fakeNRI) rtOption { return func(o *rtOptions) { o.nri = f } }

func (f *fakeNRI) record(event, id string) error {
	f.mu.Lock()
	f.events = append(f.events, event+" "+id)
	err := f.fail[event]
	delete(f.fail, event)
	during := f.during[event]
	close(f.sig)
	f.sig = make(chan struct{})
	f.mu.Unlock()
	if during != nil {
		during(id)
	}
	return err
}

// Events returns the events so far.
func (f *fakeNRI) Events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// waitFor returns once event about id has been recorded (or the test's context ends).
func (f *fakeNRI) waitFor(t *testing.T, event, id string) {
	t.Helper()
	for {
		f.mu.Lock()
		sig := f.sig
		for _, e := range f.events {
			if e == event+" "+id {
				f.mu.Unlock()
				return
			}
		}
		f.mu.Unlock()
		select {
		case <-sig:
		case <-t.Context().Done():
			t.Fatalf("no %s of %s", event, id)
		}
	}
}

func (f *fakeNRI) FailOnce(event string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[event] = err
}

func (f *fakeNRI) During(event string, fn func(id string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.during[event] = fn
}

func (f *fakeNRI) SetAdjust(fn func(ctr *nriapi.Container) *nriapi.ContainerAdjustment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adjust = fn
}

func (f *fakeNRI) BlockSync() func() {
	f.mu.Lock()
	f.synced++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.synced--
		f.mu.Unlock()
	}
}

func (f *fakeNRI) RunPodSandbox(_ context.Context, pod *nriapi.PodSandbox) error {
	if pod.GetName() == "" || pod.GetUid() == "" || pod.GetNamespace() == "" {
		return fmt.Errorf("pod %s without its metadata", pod.GetId())
	}
	return f.record("RunPodSandbox", pod.GetId())
}

func (f *fakeNRI) StopPodSandbox(_ context.Context, pod *nriapi.PodSandbox) error {
	return f.record("StopPodSandbox", pod.GetId())
}

func (f *fakeNRI) RemovePodSandbox(_ context.Context, pod *nriapi.PodSandbox) error {
	return f.record("RemovePodSandbox", pod.GetId())
}

func (f *fakeNRI) CreateContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) (*nriapi.CreateContainerResponse, error) {
	if err := f.record("CreateContainer", ctr.GetId()); err != nil {
		return nil, err
	}
	f.mu.Lock()
	adjust := f.adjust
	f.mu.Unlock()
	resp := &nriapi.CreateContainerResponse{}
	if adjust != nil {
		resp.Adjust = adjust(ctr)
	}
	return resp, nil
}

func (f *fakeNRI) PostCreateContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) error {
	return f.record("PostCreateContainer", ctr.GetId())
}

func (f *fakeNRI) StartContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) error {
	return f.record("StartContainer", ctr.GetId())
}

func (f *fakeNRI) PostStartContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) error {
	return f.record("PostStartContainer", ctr.GetId())
}

func (f *fakeNRI) UpdateContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container, res *nriapi.LinuxResources) (*nriapi.UpdateContainerResponse, error) {
	if err := f.record("UpdateContainer", ctr.GetId()); err != nil {
		return nil, err
	}
	// A plugin that pins every updated container to CPU 0.
	want := res.Copy()
	want.Cpu.Cpus = "0"
	return &nriapi.UpdateContainerResponse{Update: []*nriapi.ContainerUpdate{
		{ContainerId: ctr.GetId(), Linux: &nriapi.LinuxContainerUpdate{Resources: want}},
	}}, nil
}

func (f *fakeNRI) PostUpdateContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) error {
	return f.record("PostUpdateContainer", ctr.GetId())
}

func (f *fakeNRI) StopContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) (*nriapi.StopContainerResponse, error) {
	return &nriapi.StopContainerResponse{}, f.record("StopContainer", ctr.GetId())
}

func (f *fakeNRI) RemoveContainer(_ context.Context, _ *nriapi.PodSandbox, ctr *nriapi.Container) error {
	return f.record("RemoveContainer", ctr.GetId())
}
