package checkpoint

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

const sandboxID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(t.TempDir())
	assert.NilError(t, err)
	return s
}

func TestNewStore(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	s, err := NewStore(root)
	assert.NilError(t, err)
	assert.Equal(t, s.dir, filepath.Join(root, "sandbox"))
	fi, err := os.Stat(s.dir)
	assert.NilError(t, err)
	assert.Assert(t, fi.IsDir())
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o700))

	// An existing directory is fine.
	_, err = NewStore(root)
	assert.NilError(t, err)
}

func TestWriteRead(t *testing.T) {
	s := newStore(t)
	c := New("nginx", "default", &Data{
		PortMappings: []*PortMapping{
			{Protocol: proto(ProtocolTCP), ContainerPort: port(80), HostPort: port(18080)},
			{Protocol: proto(ProtocolUDP), ContainerPort: port(53), HostPort: port(5353), HostIP: "fd00::1"},
		},
		HostNetwork: true,
	})
	assert.NilError(t, s.Write(sandboxID, c))

	got, err := s.Read(sandboxID)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, c)

	fi, err := os.Stat(filepath.Join(s.dir, sandboxID))
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode(), os.FileMode(0o600))

	// Overwriting replaces the content and leaves no temporary file behind; a
	// file upstream wrote with mode 0644 becomes 0600.
	assert.NilError(t, os.Chmod(filepath.Join(s.dir, sandboxID), 0o644))
	c2 := New("nginx", "default", &Data{})
	assert.NilError(t, s.Write(sandboxID, c2))
	got, err = s.Read(sandboxID)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, c2)
	fi, err = os.Stat(filepath.Join(s.dir, sandboxID))
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode(), os.FileMode(0o600))
	entries, err := os.ReadDir(s.dir)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1)
}

// TestWriteBytes pins the file content to upstream's encoding.
func TestWriteBytes(t *testing.T) {
	s := newStore(t)
	c := New("n", "ns", &Data{PortMappings: []*PortMapping{{Protocol: proto(ProtocolTCP), ContainerPort: port(80), HostPort: port(18080)}}})
	assert.NilError(t, s.Write(sandboxID, c))
	b, err := os.ReadFile(filepath.Join(s.dir, sandboxID))
	assert.NilError(t, err)
	assert.Equal(t, string(b), `{"version":"v1","name":"n","namespace":"ns","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`)
}

// TestReadUpstreamFile reads a file as upstream writes it, including a key we
// do not know, which upstream's decoder ignores as well.
func TestReadUpstreamFile(t *testing.T) {
	s := newStore(t)
	content := `{"version":"v1","name":"web","namespace":"prod","data":{"host_network":true},"checksum":12315789,"extra":1}`
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, sandboxID), []byte(content), 0o600))
	got, err := s.Read(sandboxID)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, &Checkpoint{Version: "v1", Name: "web", Namespace: "prod", Data: &Data{HostNetwork: true}, Checksum: 12315789})
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string // written as the file unless missing
		missing bool
		is      func(error) bool
	}{
		{name: "missing", missing: true, is: cerrdefs.IsNotFound},
		{name: "empty file", content: "", is: cerrdefs.IsDataLoss},
		{name: "truncated json", content: `{"version":"v1","name":"n"`, is: cerrdefs.IsDataLoss},
		{name: "not json", content: "garbage", is: cerrdefs.IsDataLoss},
		{name: "checksum of the wrong type", content: `{"version":"v1","data":{},"checksum":"x"}`, is: cerrdefs.IsDataLoss},
		{name: "wrong checksum", content: `{"version":"v1","name":"n","namespace":"ns","data":{"host_network":true},"checksum":2305795928}`, is: cerrdefs.IsDataLoss},
		{name: "data edited", content: `{"version":"v1","name":"n","namespace":"ns","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18081}]},"checksum":2344035810}`, is: cerrdefs.IsDataLoss},
		{name: "no data", content: `{"version":"v1","name":"n","namespace":"ns","checksum":2305795928}`, is: cerrdefs.IsDataLoss},
		{name: "null data", content: `{"version":"v1","name":"n","namespace":"ns","data":null,"checksum":2305795928}`, is: cerrdefs.IsDataLoss},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			path := filepath.Join(s.dir, sandboxID)
			if !tc.missing {
				assert.NilError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			}
			got, err := s.Read(sandboxID)
			assert.Assert(t, tc.is(err), "got %v", err)
			assert.ErrorContains(t, err, path)
			assert.Assert(t, got == nil)
		})
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	assert.NilError(t, s.Write(sandboxID, New("n", "ns", &Data{})))
	assert.NilError(t, s.Remove(sandboxID))
	_, err := s.Read(sandboxID)
	assert.Assert(t, cerrdefs.IsNotFound(err), "got %v", err)
	assert.NilError(t, s.Remove(sandboxID))
	assert.NilError(t, s.Remove("never-written"))
}

func TestList(t *testing.T) {
	s := newStore(t)
	ids, err := s.List()
	assert.NilError(t, err)
	assert.Equal(t, len(ids), 0)

	for _, id := range []string{"b", "a", sandboxID} {
		assert.NilError(t, s.Write(id, New("n", "ns", &Data{})))
	}
	// A corrupt checkpoint is still listed: the caller decides what to do.
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, "c"), []byte("garbage"), 0o600))
	// Leftover temporary files, other hidden files and directories are not.
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, ".a5577006791947779410"), nil, 0o600))
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, ".tmp-a-123"), nil, 0o600)) // named by earlier versions
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, ".hidden"), nil, 0o600))
	assert.NilError(t, os.Mkdir(filepath.Join(s.dir, "subdir"), 0o700))

	ids, err = s.List()
	assert.NilError(t, err)
	assert.DeepEqual(t, ids, []string{sandboxID, "a", "b", "c"})
}

func TestInvalidID(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"", ".", "..", "../x", "a/b", "/abs", ".tmp-x", ".hidden", "a\x00b"} {
		t.Run(id, func(t *testing.T) {
			err := s.Write(id, New("n", "ns", &Data{}))
			assert.Assert(t, cerrdefs.IsInvalidArgument(err), "write: got %v", err)
			_, err = s.Read(id)
			assert.Assert(t, cerrdefs.IsInvalidArgument(err), "read: got %v", err)
			err = s.Remove(id)
			assert.Assert(t, cerrdefs.IsInvalidArgument(err), "remove: got %v", err)
		})
	}
	// Nothing escaped the directory.
	entries, err := os.ReadDir(filepath.Dir(s.dir))
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1)
}

func TestWriteNoData(t *testing.T) {
	s := newStore(t)
	for _, c := range []*Checkpoint{nil, {Version: Version, Name: "n"}} {
		err := s.Write(sandboxID, c)
		assert.Assert(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
	}
	_, err := os.Stat(filepath.Join(s.dir, sandboxID))
	assert.Assert(t, os.IsNotExist(err))
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	s := newStore(t)
	// A directory in the way makes the rename fail.
	assert.NilError(t, os.Mkdir(filepath.Join(s.dir, sandboxID), 0o700))
	assert.NilError(t, os.WriteFile(filepath.Join(s.dir, sandboxID, "f"), nil, 0o600))
	err := s.Write(sandboxID, New("n", "ns", &Data{}))
	assert.ErrorContains(t, err, "write checkpoint")
	entries, err := os.ReadDir(s.dir)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1)
	assert.Equal(t, entries[0].Name(), sandboxID)
}

// TestConcurrentWrites checks that readers only ever see a whole checkpoint.
func TestConcurrentWrites(t *testing.T) {
	s := newStore(t)
	assert.NilError(t, s.Write(sandboxID, New("n", "ns", &Data{})))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				d := &Data{HostNetwork: j%2 == 0, PortMappings: []*PortMapping{{HostPort: port(int32(i*100 + j))}}}
				if err := s.Write(sandboxID, New("n", "ns", d)); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Read(sandboxID); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ids, err := s.List()
	assert.NilError(t, err)
	assert.DeepEqual(t, ids, []string{sandboxID})
}
