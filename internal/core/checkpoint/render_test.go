package checkpoint

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"
)

func proto(p Protocol) *Protocol { return &p }

func port(n int32) *int32 { return &n }

// renderVectors hold the rendering and checksum of upstream's hashing. The first
// three are the reference vectors verified against upstream cri-dockerd; the rest
// were generated with go-spew v1.1.1's ConfigState{Indent: " ", SortKeys: true,
// DisableMethods: true, SpewKeys: true}.Sprintf("%#v", ...) on copies of
// upstream's types declared in packages named core and config. wantJSON is the
// encoding/json output of the same value; it is empty when decoding it would not
// give back the value (an empty non-nil slice decodes as nil).
func renderVectors() []struct {
	name     string
	data     *Data
	want     string
	sum      uint32
	wantJSON string
} {
	shared := port(8080)
	same := &PortMapping{Protocol: proto(ProtocolTCP), ContainerPort: port(1), HostPort: port(2)}
	return []struct {
		name     string
		data     *Data
		want     string
		sum      uint32
		wantJSON string
	}{
		{
			name:     "reference: no mappings",
			data:     &Data{},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)<nil> HostNetwork:(bool)false}",
			sum:      2305795928,
			wantJSON: `{}`,
		},
		{
			name:     "reference: host network",
			data:     &Data{HostNetwork: true},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)<nil> HostNetwork:(bool)true}",
			sum:      12315789,
			wantJSON: `{"host_network":true}`,
		},
		{
			name:     "reference: one tcp mapping",
			data:     &Data{PortMappings: []*PortMapping{{Protocol: proto(ProtocolTCP), ContainerPort: port(80), HostPort: port(18080)}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)tcp ContainerPort:(*int32)80 HostPort:(*int32)18080 HostIP:(string)}] HostNetwork:(bool)false}",
			sum:      2344035810,
			wantJSON: `{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]}`,
		},
		{
			name: "spew: empty non-nil slice",
			data: &Data{PortMappings: []*PortMapping{}},
			want: "(core.CheckpointData){PortMappings:([]*config.PortMapping)[] HostNetwork:(bool)false}",
			sum:  3930330829,
		},
		{
			name: "spew: two mappings, udp with host ip",
			data: &Data{PortMappings: []*PortMapping{
				{Protocol: proto(ProtocolTCP), ContainerPort: port(80), HostPort: port(8080)},
				{Protocol: proto(ProtocolUDP), ContainerPort: port(53), HostPort: port(5353), HostIP: "10.0.0.1"},
			}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)tcp ContainerPort:(*int32)80 HostPort:(*int32)8080 HostIP:(string)} <*>{Protocol:(*config.Protocol)udp ContainerPort:(*int32)53 HostPort:(*int32)5353 HostIP:(string)10.0.0.1}] HostNetwork:(bool)false}",
			sum:      1848510787,
			wantJSON: `{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080},{"protocol":"udp","container_port":53,"host_port":5353,"host_ip":"10.0.0.1"}]}`,
		},
		{
			name:     "spew: mapping with nil fields",
			data:     &Data{PortMappings: []*PortMapping{{}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)<nil> HostPort:(*int32)<nil> HostIP:(string)}] HostNetwork:(bool)false}",
			sum:      3292248103,
			wantJSON: `{"port_mappings":[{}]}`,
		},
		{
			name:     "spew: sctp on ipv6 with host network",
			data:     &Data{PortMappings: []*PortMapping{{Protocol: proto(ProtocolSCTP), ContainerPort: port(9999), HostPort: port(9999), HostIP: "fd00::1"}}, HostNetwork: true},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)sctp ContainerPort:(*int32)9999 HostPort:(*int32)9999 HostIP:(string)fd00::1}] HostNetwork:(bool)true}",
			sum:      848494852,
			wantJSON: `{"port_mappings":[{"protocol":"sctp","container_port":9999,"host_port":9999,"host_ip":"fd00::1"}],"host_network":true}`,
		},
		{
			// spew leaves its "omit the next type" flag set after a nil
			// element, so HostNetwork loses its "(bool)".
			name:     "spew: nil element last",
			data:     &Data{PortMappings: []*PortMapping{nil}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<nil>] HostNetwork:false}",
			sum:      1062990627,
			wantJSON: `{"port_mappings":[null]}`,
		},
		{
			name:     "spew: nil element first",
			data:     &Data{PortMappings: []*PortMapping{nil, {Protocol: proto(ProtocolUDP)}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<nil> <*>{Protocol:(*config.Protocol)udp ContainerPort:(*int32)<nil> HostPort:(*int32)<nil> HostIP:(string)}] HostNetwork:(bool)false}",
			sum:      4183393934,
			wantJSON: `{"port_mappings":[null,{"protocol":"udp"}]}`,
		},
		{
			name:     "spew: zero and negative ports",
			data:     &Data{PortMappings: []*PortMapping{{ContainerPort: port(0), HostPort: port(-1)}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)0 HostPort:(*int32)-1 HostIP:(string)}] HostNetwork:(bool)false}",
			sum:      1015184889,
			wantJSON: `{"port_mappings":[{"container_port":0,"host_port":-1}]}`,
		},
		{
			name:     "spew: int32 extremes",
			data:     &Data{PortMappings: []*PortMapping{{ContainerPort: port(2147483647), HostPort: port(-2147483648)}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)2147483647 HostPort:(*int32)-2147483648 HostIP:(string)}] HostNetwork:(bool)false}",
			sum:      3322114441,
			wantJSON: `{"port_mappings":[{"container_port":2147483647,"host_port":-2147483648}]}`,
		},
		{
			name:     "spew: host ip written raw, not quoted or escaped",
			data:     &Data{PortMappings: []*PortMapping{{HostIP: "a b\"c\n\t\\é{}"}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)<nil> HostPort:(*int32)<nil> HostIP:(string)a b\"c\n\t\\é{}}] HostNetwork:(bool)false}",
			sum:      3433511016,
			wantJSON: `{"port_mappings":[{"host_ip":"a b\"c\n\t\\é{}"}]}`,
		},
		{
			name:     "spew: empty protocol, ipv6 any address",
			data:     &Data{PortMappings: []*PortMapping{{Protocol: proto(""), HostIP: "::"}}},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol) ContainerPort:(*int32)<nil> HostPort:(*int32)<nil> HostIP:(string)::}] HostNetwork:(bool)false}",
			sum:      3853925298,
			wantJSON: `{"port_mappings":[{"protocol":"","host_ip":"::"}]}`,
		},
		{
			name: "spew: shared pointers are not cycles",
			data: &Data{PortMappings: []*PortMapping{{ContainerPort: shared, HostPort: shared}, same, same}},
			want: "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)8080 HostPort:(*int32)8080 HostIP:(string)} <*>{Protocol:(*config.Protocol)tcp ContainerPort:(*int32)1 HostPort:(*int32)2 HostIP:(string)} <*>{Protocol:(*config.Protocol)tcp ContainerPort:(*int32)1 HostPort:(*int32)2 HostIP:(string)}] HostNetwork:(bool)false}",
			sum:  3306916443,
			wantJSON: `{"port_mappings":[{"container_port":8080,"host_port":8080},` +
				`{"protocol":"tcp","container_port":1,"host_port":2},{"protocol":"tcp","container_port":1,"host_port":2}]}`,
		},
		{
			name:     "spew: only a host ip, host network",
			data:     &Data{PortMappings: []*PortMapping{{HostIP: "0.0.0.0"}}, HostNetwork: true},
			want:     "(core.CheckpointData){PortMappings:([]*config.PortMapping)[<*>{Protocol:(*config.Protocol)<nil> ContainerPort:(*int32)<nil> HostPort:(*int32)<nil> HostIP:(string)0.0.0.0}] HostNetwork:(bool)true}",
			sum:      2829973670,
			wantJSON: `{"port_mappings":[{"host_ip":"0.0.0.0"}],"host_network":true}`,
		},
	}
}

func TestRender(t *testing.T) {
	for _, tc := range renderVectors() {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, render(tc.data), tc.want)
			assert.Equal(t, Checksum(tc.data), tc.sum)
		})
	}
}

// TestRenderJSON checks that each vector's data encodes as upstream's does and
// that the decoded data, which is what Verify sees on read, hashes the same.
func TestRenderJSON(t *testing.T) {
	for _, tc := range renderVectors() {
		if tc.wantJSON == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.data)
			assert.NilError(t, err)
			assert.Equal(t, string(b), tc.wantJSON)

			var d Data
			assert.NilError(t, json.Unmarshal([]byte(tc.wantJSON), &d))
			assert.Equal(t, render(&d), tc.want)
			assert.Equal(t, Checksum(&d), tc.sum)
		})
	}
}

func TestRenderNilData(t *testing.T) {
	assert.Equal(t, render(nil), render(&Data{}))
	assert.Equal(t, Checksum(nil), uint32(2305795928))
}
