package checkpoint

import (
	"encoding/json"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

func TestNewJSON(t *testing.T) {
	tests := []struct {
		name string
		data *Data
		want string
	}{
		{
			name: "reference tcp mapping",
			data: &Data{PortMappings: []*PortMapping{{Protocol: proto(ProtocolTCP), ContainerPort: port(80), HostPort: port(18080)}}},
			want: `{"version":"v1","name":"n","namespace":"ns","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`,
		},
		{
			name: "host network",
			data: &Data{HostNetwork: true},
			want: `{"version":"v1","name":"n","namespace":"ns","data":{"host_network":true},"checksum":12315789}`,
		},
		{
			name: "nil data becomes empty data",
			data: nil,
			want: `{"version":"v1","name":"n","namespace":"ns","data":{},"checksum":2305795928}`,
		},
		{
			name: "all fields",
			data: &Data{
				PortMappings: []*PortMapping{{Protocol: proto(ProtocolUDP), ContainerPort: port(53), HostPort: port(5353), HostIP: "10.0.0.1"}},
				HostNetwork:  true,
			},
			// checksum from go-spew v1.1.1, as the vectors in render_test.go
			want: `{"version":"v1","name":"n","namespace":"ns","data":{"port_mappings":[{"protocol":"udp","container_port":53,"host_port":5353,"host_ip":"10.0.0.1"}],"host_network":true},"checksum":4210714230}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New("n", "ns", tc.data)
			assert.NilError(t, c.Verify())
			b, err := json.Marshal(c)
			assert.NilError(t, err)
			assert.Equal(t, string(b), tc.want)

			var back Checkpoint
			assert.NilError(t, json.Unmarshal(b, &back))
			assert.NilError(t, back.Verify())
			assert.DeepEqual(t, &back, c)
		})
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name    string
		c       *Checkpoint
		wantErr bool
	}{
		{name: "fresh", c: New("n", "ns", &Data{HostNetwork: true})},
		{name: "wrong checksum", c: &Checkpoint{Version: Version, Data: &Data{HostNetwork: true}, Checksum: 2305795928}, wantErr: true},
		{name: "zero checksum", c: &Checkpoint{Version: Version, Data: &Data{}}, wantErr: true},
		{name: "no data", c: &Checkpoint{Version: Version, Checksum: 2305795928}, wantErr: true},
		{name: "name and namespace are not hashed", c: &Checkpoint{Version: Version, Name: "x", Namespace: "y", Data: &Data{}, Checksum: 2305795928}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Verify()
			if !tc.wantErr {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, cerrdefs.IsDataLoss(err), "got %v", err)
		})
	}
}
