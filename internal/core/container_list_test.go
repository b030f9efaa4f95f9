package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func listContainerIDs(t *testing.T, env *rtEnv, f *runtimeapi.ContainerFilter) []string {
	t.Helper()
	resp, err := env.svc.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: f})
	assert.NilError(t, err)
	return sortedIDs(resp.Containers, (*runtimeapi.Container).GetId)
}

func containerState(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
	return &runtimeapi.ContainerStateValue{State: s}
}

func TestListContainers(t *testing.T) {
	env := newRTEnv(t)
	webCfg := rtSandboxConfig("web")
	web := env.runSandbox(t, webCfg)
	dbCfg := rtSandboxConfig("db")
	db := env.runSandbox(t, dbCfg)

	appCfg := rtContainerConfig("app")
	appCfg.Labels["tier"] = "front"
	appCfg.Annotations = map[string]string{"note": "n"}
	app := env.createContainer(t, web, webCfg, appCfg)
	env.startContainer(t, app)
	created := env.createContainer(t, web, webCfg, rtContainerConfig("sidecar"))
	sqlCfg := rtContainerConfig("sql")
	sqlCfg.Labels["tier"] = "back"
	sql := env.createContainer(t, db, dbCfg, sqlCfg)
	env.startContainer(t, sql)
	assert.NilError(t, stopContainer(env, sql, 0))
	// A foreign container carrying our type label but not our naming, and a plain one.
	_, err := env.engine.CreateContainer(context.Background(), docker.ContainerSpec{
		Name: "someone_else", Image: rtContainerImage, Labels: map[string]string{labelContainerType: typeContainer},
	})
	assert.NilError(t, err)
	_, err = env.engine.CreateContainer(context.Background(), docker.ContainerSpec{Name: "plain", Image: rtContainerImage})
	assert.NilError(t, err)

	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{name: "nil", want: sorted(app, created, sql)},
		{name: "empty", filter: &runtimeapi.ContainerFilter{}, want: sorted(app, created, sql)},
		{name: "id", filter: &runtimeapi.ContainerFilter{Id: sql}, want: []string{sql}},
		{name: "id prefix", filter: &runtimeapi.ContainerFilter{Id: app[:12]}, want: []string{app}},
		{name: "sandbox id is no container", filter: &runtimeapi.ContainerFilter{Id: web}},
		{name: "sandbox", filter: &runtimeapi.ContainerFilter{PodSandboxId: web}, want: sorted(app, created)},
		{name: "other sandbox", filter: &runtimeapi.ContainerFilter{PodSandboxId: db}, want: []string{sql}},
		{name: "unknown sandbox", filter: &runtimeapi.ContainerFilter{PodSandboxId: "nope"}},
		{name: "running", filter: &runtimeapi.ContainerFilter{State: containerState(runtimeapi.ContainerState_CONTAINER_RUNNING)}, want: []string{app}},
		{name: "created", filter: &runtimeapi.ContainerFilter{State: containerState(runtimeapi.ContainerState_CONTAINER_CREATED)}, want: []string{created}},
		{name: "exited", filter: &runtimeapi.ContainerFilter{State: containerState(runtimeapi.ContainerState_CONTAINER_EXITED)}, want: []string{sql}},
		{name: "unknown state", filter: &runtimeapi.ContainerFilter{State: containerState(runtimeapi.ContainerState_CONTAINER_UNKNOWN)}},
		{name: "label", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"tier": "back"}}, want: []string{sql}},
		{name: "label and sandbox", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"tier": "back"}, PodSandboxId: web}},
		{name: "sandbox and state", filter: &runtimeapi.ContainerFilter{
			PodSandboxId: web, State: containerState(runtimeapi.ContainerState_CONTAINER_CREATED),
		}, want: []string{created}},
		{name: "annotation is no label", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"note": "n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, listContainerIDs(t, env, tc.filter), tc.want)
		})
	}

	resp, err := env.svc.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: app}})
	assert.NilError(t, err)
	assert.Assert(t, is.Len(resp.Containers, 1))
	d := env.inspect(t, app)
	want := &runtimeapi.Container{
		Id:           app,
		PodSandboxId: web,
		Metadata:     &runtimeapi.ContainerMetadata{Name: "app"},
		Image:        &runtimeapi.ImageSpec{Image: rtContainerImage},
		ImageRef:     d.ImageID,
		ImageId:      d.ImageID,
		State:        runtimeapi.ContainerState_CONTAINER_RUNNING,
		CreatedAt:    d.Created.UnixNano(),
		Labels:       map[string]string{labelContainerName: "app", "tier": "front"},
		Annotations:  map[string]string{"note": "n"},
	}
	if diff := cmp.Diff(want, resp.Containers[0], protocmp.Transform()); diff != "" {
		t.Errorf("container (-want +got):\n%s", diff)
	}
}

func TestListContainersEngineError(t *testing.T) {
	env := newRTEnv(t)
	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	_, err := env.svc.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}
