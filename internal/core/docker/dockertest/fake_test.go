package dockertest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// injectPanic returns what InjectError(method, err) panicked with (nil if it did not).
func injectPanic(f *dockertest.Fake, method string, err error) (recovered any) {
	defer func() { recovered = recover() }()
	f.InjectError(method, err)
	return nil
}

func TestInjectErrorRejectsUnknownMethods(t *testing.T) {
	f := dockertest.New()
	injected := errors.New("injected")
	for _, method := range []string{"ListImage", "listImages", "Inspect", "", "AddImage", "SetDown"} {
		got := injectPanic(f, method, injected)
		assert.Check(t, got != nil, "InjectError(%q) accepted a name docker.Client lacks", method)
		assert.Check(t, is.Contains(got, method), "the panic names the method")
		got = injectPanic(f, method, nil)
		assert.Check(t, got != nil, "clearing %q is a typo too", method)
	}
	// Every method of the interface, including those of embedded interfaces, is accepted.
	client := reflect.TypeFor[docker.Client]()
	for i := range client.NumMethod() {
		method := client.Method(i).Name
		assert.Check(t, is.Nil(injectPanic(f, method, injected)), method)
		assert.Check(t, is.Nil(injectPanic(f, method, nil)), method)
	}
	f.InjectError("Ping", injected)
	assert.Check(t, is.ErrorIs(f.Ping(context.Background()), injected))
}
