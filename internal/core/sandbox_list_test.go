package core

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func listSandboxIDs(t *testing.T, env *rtEnv, f *runtimeapi.PodSandboxFilter) []string {
	t.Helper()
	resp, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: f})
	assert.NilError(t, err)
	return sortedIDs(resp.Items, (*runtimeapi.PodSandbox).GetId)
}

// sortedIDs returns the IDs of items, sorted.
func sortedIDs[T any](items []T, id func(T) string) []string {
	var ids []string
	for _, item := range items {
		ids = append(ids, id(item))
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func TestListPodSandbox(t *testing.T) {
	env := newRTEnv(t)
	webCfg := rtSandboxConfig("web")
	webCfg.Labels["tier"] = "front"
	webCfg.Annotations["note"] = "n"
	web := env.runSandbox(t, webCfg)
	dbCfg := rtSandboxConfig("db")
	dbCfg.Labels["tier"] = "back"
	db := env.runSandbox(t, dbCfg)
	assert.NilError(t, stopSandbox(env, db))
	// Containers and foreign containers are not sandboxes.
	env.startContainer(t, env.createContainer(t, web, webCfg, rtContainerConfig("app")))
	_, err := env.engine.CreateContainer(context.Background(), docker.ContainerSpec{Name: "plain", Image: rtSandboxImage})
	assert.NilError(t, err)

	for _, tc := range []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{name: "nil", want: sorted(web, db)},
		{name: "empty", filter: &runtimeapi.PodSandboxFilter{}, want: sorted(web, db)},
		{name: "id", filter: &runtimeapi.PodSandboxFilter{Id: db}, want: []string{db}},
		{name: "id prefix", filter: &runtimeapi.PodSandboxFilter{Id: web[:12]}, want: []string{web}},
		{name: "unknown id", filter: &runtimeapi.PodSandboxFilter{Id: "ffffffffffff"}},
		{name: "ready", filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, want: []string{web}},
		{name: "notready", filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, want: []string{db}},
		{name: "label", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "back"}}, want: []string{db}},
		{name: "labels", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "front", labelPodName: "web"}}, want: []string{web}},
		{name: "label mismatch", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "front", labelPodName: "db"}}},
		{name: "label and state", filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"tier": "back"},
			State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		}},
		{name: "annotation is no label", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"note": "n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, listSandboxIDs(t, env, tc.filter), tc.want)
		})
	}

	resp, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: web}})
	assert.NilError(t, err)
	assert.Assert(t, is.Len(resp.Items, 1))
	want := &runtimeapi.PodSandbox{
		Id:        web,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "web-uid", Attempt: 1},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: env.inspect(t, web).Created.UnixNano(),
		Labels: map[string]string{
			labelPodName: "web", labelPodNamespace: "default", labelPodUID: "web-uid", "tier": "front", labelContainerName: "POD",
		},
		Annotations: map[string]string{"kubernetes.io/config.source": "api", "note": "n"},
	}
	if diff := cmp.Diff(want, resp.Items[0], protocmp.Transform()); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
}

func TestListPodSandboxCheckpoints(t *testing.T) {
	env := newRTEnv(t)
	live := env.runSandbox(t, rtSandboxConfig("live"))
	gone := env.runSandbox(t, rtSandboxConfig("gone"))
	assert.NilError(t, env.engine.RemoveContainer(context.Background(), gone))
	env.writeCheckpoint(t, "cafe0001", rtHostNetwork(rtSandboxConfig("orphan")))

	// A checkpoint whose checksum does not match its data.
	corrupt := filepath.Join(env.cpDir, "bad0001")
	assert.NilError(t, os.WriteFile(corrupt,
		[]byte(`{"version":"v1","name":"bad","namespace":"default","data":{"host_network":true},"checksum":1}`), 0o600))
	// One that does not parse.
	garbage := filepath.Join(env.cpDir, "bad0002")
	assert.NilError(t, os.WriteFile(garbage, []byte(`{not json`), 0o600))
	// Hidden files are not checkpoints.
	hidden := filepath.Join(env.cpDir, ".tmp-abc-123")
	assert.NilError(t, os.WriteFile(hidden, []byte(`junk`), 0o600))

	// With a filter: containers only, checkpoints untouched.
	assert.DeepEqual(t, listSandboxIDs(t, env, &runtimeapi.PodSandboxFilter{}), []string{live})
	assert.DeepEqual(t, listSandboxIDs(t, env, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
	}), []string(nil))
	_, err := os.Stat(corrupt)
	assert.NilError(t, err, "a filtered list must not delete checkpoints")

	resp, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	byID := map[string]*runtimeapi.PodSandbox{}
	for _, item := range resp.Items {
		byID[item.Id] = item
	}
	assert.Equal(t, len(byID), 3, "items: %v", resp.Items)
	assert.Equal(t, byID[live].GetState(), runtimeapi.PodSandboxState_SANDBOX_READY)
	for sbID, name := range map[string]string{gone: "gone", "cafe0001": "orphan"} {
		want := &runtimeapi.PodSandbox{
			Id:       sbID,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default"},
			State:    runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		}
		if diff := cmp.Diff(want, byID[sbID], protocmp.Transform()); diff != "" {
			t.Errorf("checkpoint-only sandbox %s (-want +got):\n%s", sbID, diff)
		}
	}
	for _, p := range []string{corrupt, garbage} {
		_, err := os.Stat(p)
		assert.Check(t, os.IsNotExist(err), "corrupt checkpoint %s kept: %v", p, err)
	}
	_, err = os.Stat(hidden)
	assert.NilError(t, err, "hidden files are left alone")
	_, ok := env.checkpointFile(t, live)
	assert.Check(t, ok)

	// kubelet then removes the checkpoint-only sandboxes.
	for _, sbID := range []string{gone, "cafe0001"} {
		assert.NilError(t, removeSandbox(env, sbID))
	}
	assert.DeepEqual(t, listSandboxIDs(t, env, nil), []string{live})
}

func TestListPodSandboxSkipsForeignNames(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	// Labelled as a sandbox but not named like one.
	_, err := env.engine.CreateContainer(context.Background(), docker.ContainerSpec{
		Name: "not_a_kubernetes_name", Image: rtSandboxImage, Labels: map[string]string{labelContainerType: typeSandbox},
	})
	assert.NilError(t, err)
	assert.DeepEqual(t, listSandboxIDs(t, env, nil), []string{sbID})
}

func TestListPodSandboxEngineError(t *testing.T) {
	env := newRTEnv(t)
	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	_, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	assert.Check(t, strings.Contains(err.Error(), "list pod sandboxes"))
}

// kubelet looks up a pod's sandboxes with a label-only filter (getSandboxIDByPodUID)
// and expects stopped ones too: a filter without a state selects every state.
func TestListPodSandboxFilterWithoutStateListsStopped(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	assert.NilError(t, stopSandbox(env, sbID))
	got := listSandboxIDs(t, env, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: "web-uid"}})
	assert.DeepEqual(t, got, []string{sbID})
}
