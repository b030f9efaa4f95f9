package checkpoint

import (
	"fmt"
	"hash/fnv"
	"io"

	cerrdefs "github.com/containerd/errdefs"
)

// Version is the only checkpoint schema version upstream cri-dockerd writes.
const Version = "v1"

// Protocol is a port mapping protocol as written in checkpoints: "tcp", "udp" or
// "sctp".
type Protocol string

// Protocols written by cri-dockerd.
const (
	ProtocolTCP  Protocol = "tcp"
	ProtocolUDP  Protocol = "udp"
	ProtocolSCTP Protocol = "sctp"
)

// PortMapping is one host port mapping of a sandbox. The pointer fields are
// omitted from the JSON when nil, as upstream's are; nil and a pointer to zero
// give different checksums.
type PortMapping struct {
	// Protocol is the protocol of the mapping, nil when unset.
	Protocol *Protocol `json:"protocol,omitempty"`
	// ContainerPort is the port inside the sandbox, nil when unset.
	ContainerPort *int32 `json:"container_port,omitempty"`
	// HostPort is the port on the host, nil when unset.
	HostPort *int32 `json:"host_port,omitempty"`
	// HostIP is the host address the port is bound to, empty for all addresses.
	HostIP string `json:"host_ip,omitempty"`
}

// Data is the checksummed part of a checkpoint.
type Data struct {
	// PortMappings are the sandbox's host port mappings. A nil slice and an
	// empty one give different checksums; only nil survives a JSON round trip.
	PortMappings []*PortMapping `json:"port_mappings,omitempty"`
	// HostNetwork is true when the sandbox uses the host's network namespace.
	HostNetwork bool `json:"host_network,omitempty"`
}

// Checkpoint is the content of one sandbox checkpoint file. Its fields are
// encoded in declaration order, which is the key order upstream writes.
type Checkpoint struct {
	// Version is the schema version, "v1".
	Version string `json:"version"`
	// Name is the pod name of the sandbox.
	Name string `json:"name"`
	// Namespace is the pod namespace of the sandbox.
	Namespace string `json:"namespace"`
	// Data is the checksummed sandbox data; upstream cannot read a checkpoint
	// without it, so Write refuses nil and Verify reports it as data loss.
	Data *Data `json:"data,omitempty"`
	// Checksum is Checksum(Data), stored as a JSON number.
	Checksum uint32 `json:"checksum"`
}

// New returns a version "v1" checkpoint of data with its checksum computed. A
// nil data is replaced by an empty Data.
func New(name, namespace string, data *Data) *Checkpoint {
	if data == nil {
		data = &Data{}
	}
	return &Checkpoint{
		Version:   Version,
		Name:      name,
		Namespace: namespace,
		Data:      data,
		Checksum:  Checksum(data),
	}
}

// Verify recomputes the checksum of c.Data and returns an error wrapping
// errdefs.ErrDataLoss when it does not match c.Checksum or when c has no data.
func (c *Checkpoint) Verify() error {
	if c.Data == nil {
		return fmt.Errorf("checkpoint has no data: %w", cerrdefs.ErrDataLoss)
	}
	if got := Checksum(c.Data); got != c.Checksum {
		return fmt.Errorf("checkpoint checksum %d does not match its data (checksum %d): %w",
			c.Checksum, got, cerrdefs.ErrDataLoss)
	}
	return nil
}

// Checksum returns the 32-bit FNV-1a hash of the rendering of d that upstream
// cri-dockerd hashes. A nil d hashes as an empty Data.
func Checksum(d *Data) uint32 {
	h := fnv.New32a()
	_, _ = io.WriteString(h, render(d)) // a hash.Hash never returns an error
	return h.Sum32()
}
