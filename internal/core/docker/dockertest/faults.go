package dockertest

// containerCall is one method called for one container (by its full ID).
type containerCall struct{ method, id string }

// containerFault is what happens to a containerCall: it fails with err, or the
// container is removed just before it.
type containerFault struct {
	err    error
	remove bool
}

// InjectContainerError makes method (e.g. "ContainerStats") fail with err when it is
// called for container id, and for no other container, until cleared with nil. An
// outage or an error injected for the whole method (InjectError) comes first.
func (f *Fake) InjectContainerError(method, id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.faults, containerCall{method, id})
		return
	}
	f.setFault(containerCall{method, id}, containerFault{err: err})
}

// RemoveBefore removes container id the next time method is called for it, just
// before the method looks it up, as when someone removes it between a caller's list
// and its next call: that call finds no such container (NotFound). It happens once.
func (f *Fake) RemoveBefore(method, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setFault(containerCall{method, id}, containerFault{remove: true})
}

// setFault records a fault. Caller holds mu.
func (f *Fake) setFault(call containerCall, fault containerFault) {
	if f.faults == nil {
		f.faults = map[containerCall]containerFault{}
	}
	f.faults[call] = fault
}

// containerFault applies the fault set for method on the container ref names, if
// any, and returns the error the call fails with (nil when it goes on). Caller
// holds mu.
func (f *Fake) containerFault(method, ref string) error {
	c := f.container(ref)
	if c == nil {
		return nil
	}
	call := containerCall{method, c.details.ID}
	fault, ok := f.faults[call]
	if !ok {
		return nil
	}
	if fault.remove {
		delete(f.faults, call)
		delete(f.containers, c.details.ID)
		f.publishContainer("destroy", c.details.ID)
		f.notify()
		return nil
	}
	return fault.err
}
