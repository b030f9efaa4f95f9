package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	eventsv1 "github.com/containerd/containerd/api/events"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Store is what the sticky keeper needs from the engine's containerd namespace:
// image records, content, one lease and the image events. grpcStore is the real one.
type Store interface {
	// Records lists every image record.
	Records(ctx context.Context) ([]Record, error)
	// CreateRecord creates a record (AlreadyExists when one has the name).
	CreateRecord(ctx context.Context, rec Record) error
	// SetLabels sets the labels of set and removes the keys of del on the record
	// called name, whose target is target.
	SetLabels(ctx context.Context, name string, target Descriptor, set map[string]string, del []string) error
	// BlobSize is the size of a blob; ErrNoBlob when the store lacks it.
	BlobSize(ctx context.Context, digest string) (int64, error)
	// ReadBlob reads a whole blob of at most max bytes; ErrNoBlob when absent.
	ReadBlob(ctx context.Context, digest string, max int64) ([]byte, error)
	// EnsureLease creates the lease id unless it exists; it never expires.
	EnsureLease(ctx context.Context, id string) error
	// LeasedContent lists the content digests the lease id holds (none when it does
	// not exist).
	LeasedContent(ctx context.Context, id string) ([]string, error)
	// Lease adds content to the lease id; Release removes it.
	Lease(ctx context.Context, id, digest string) error
	Release(ctx context.Context, id, digest string) error
	// DeleteLease deletes the lease id and lets containerd collect what only it held;
	// a lease that does not exist is no error.
	DeleteLease(ctx context.Context, id string) error
	// ImageEvents streams the namespace's image events until ctx ends or the stream
	// breaks (the error says why).
	ImageEvents(ctx context.Context, fn func(Event)) error
}

// Record is one containerd image record: what restoring it needs.
type Record struct {
	Name   string            `json:"name"`
	Target Descriptor        `json:"target"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Descriptor is a record's target.
type Descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// Event is one image event: topic /images/create, /images/update or /images/delete.
type Event struct {
	Topic  string
	Name   string
	Labels map[string]string // of create and update
	At     time.Time
}

// Image event topics.
const (
	TopicImageCreate = "/images/create"
	TopicImageUpdate = "/images/update"
	TopicImageDelete = "/images/delete"
)

// ErrNoBlob is the error for content the store does not have.
var ErrNoBlob = errors.New("no such content")

// contentResource is the lease resource type of content blobs.
const contentResource = "content"

// grpcStore is Store over containerd's gRPC API, in one namespace.
type grpcStore struct {
	src     *Source // the connection, namespace and call timeout
	images  imagesapi.ImagesClient
	content contentapi.ContentClient
	leases  leasesapi.LeasesClient
	events  eventsapi.EventsClient
}

// Store returns the sticky keeper's view of the source's containerd.
func (s *Source) Store() Store {
	return &grpcStore{
		src: s, images: s.images, content: contentapi.NewContentClient(s.conn),
		leases: leasesapi.NewLeasesClient(s.conn), events: eventsapi.NewEventsClient(s.conn),
	}
}

func toDescriptor(d *types.Descriptor) Descriptor {
	return Descriptor{MediaType: d.GetMediaType(), Digest: d.GetDigest(), Size: d.GetSize()}
}

func (g *grpcStore) Records(ctx context.Context) ([]Record, error) {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	resp, err := g.images.List(cctx, &imagesapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list image records: %w", err)
	}
	out := make([]Record, 0, len(resp.GetImages()))
	for _, im := range resp.GetImages() {
		out = append(out, Record{Name: im.GetName(), Target: toDescriptor(im.GetTarget()), Labels: im.GetLabels()})
	}
	return out, nil
}

func (g *grpcStore) CreateRecord(ctx context.Context, rec Record) error {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	_, err := g.images.Create(cctx, &imagesapi.CreateImageRequest{Image: &imagesapi.Image{
		Name: rec.Name, Labels: rec.Labels,
		Target: &types.Descriptor{MediaType: rec.Target.MediaType, Digest: rec.Target.Digest, Size: rec.Target.Size},
	}})
	if err != nil {
		return fmt.Errorf("create image record %s: %w", rec.Name, err)
	}
	return nil
}

func (g *grpcStore) SetLabels(ctx context.Context, name string, target Descriptor, set map[string]string, del []string) error {
	paths := make([]string, 0, len(set)+len(del))
	for k := range set {
		paths = append(paths, "labels."+k)
	}
	for _, k := range del {
		paths = append(paths, "labels."+k)
	}
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	// The target is required even when the mask names only labels (see tryRestore).
	_, err := g.images.Update(cctx, &imagesapi.UpdateImageRequest{
		Image: &imagesapi.Image{Name: name, Labels: set,
			Target: &types.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
	})
	if err != nil {
		return fmt.Errorf("label image record %s: %w", name, err)
	}
	return nil
}

func (g *grpcStore) BlobSize(ctx context.Context, digest string) (int64, error) {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	resp, err := g.content.Info(cctx, &contentapi.InfoRequest{Digest: digest})
	if status.Code(err) == codes.NotFound {
		return 0, ErrNoBlob
	}
	if err != nil {
		return 0, fmt.Errorf("content %s: %w", digest, err)
	}
	return resp.GetInfo().GetSize(), nil
}

func (g *grpcStore) ReadBlob(ctx context.Context, digest string, limit int64) ([]byte, error) {
	size, err := g.BlobSize(ctx, digest)
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("content %s: %d bytes, more than the %d a manifest or config may have", digest, size, limit)
	}
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	stream, err := g.content.Read(cctx, &contentapi.ReadContentRequest{Digest: digest})
	if err != nil {
		return nil, fmt.Errorf("read content %s: %w", digest, err)
	}
	buf := make([]byte, 0, size)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if status.Code(err) == codes.NotFound {
			return nil, ErrNoBlob
		}
		if err != nil {
			return nil, fmt.Errorf("read content %s: %w", digest, err)
		}
		if int64(len(buf)+len(resp.GetData())) > limit {
			return nil, fmt.Errorf("content %s: more than %d bytes", digest, limit)
		}
		buf = append(buf, resp.GetData()...)
	}
}

func (g *grpcStore) EnsureLease(ctx context.Context, id string) error {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	_, err := g.leases.Create(cctx, &leasesapi.CreateRequest{ID: id})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create lease %s: %w", id, err)
	}
	return nil
}

func (g *grpcStore) LeasedContent(ctx context.Context, id string) ([]string, error) {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	resp, err := g.leases.ListResources(cctx, &leasesapi.ListResourcesRequest{ID: id})
	if status.Code(err) == codes.NotFound {
		return nil, nil // no such lease: it holds nothing
	}
	if err != nil {
		return nil, fmt.Errorf("list resources of lease %s: %w", id, err)
	}
	var out []string
	for _, r := range resp.GetResources() {
		if r.GetType() == contentResource {
			out = append(out, r.GetID())
		}
	}
	return out, nil
}

func (g *grpcStore) Lease(ctx context.Context, id, digest string) error {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	_, err := g.leases.AddResource(cctx, &leasesapi.AddResourceRequest{ID: id, Resource: &leasesapi.Resource{ID: digest, Type: contentResource}})
	if err != nil {
		return fmt.Errorf("add %s to lease %s: %w", digest, id, err)
	}
	return nil
}

func (g *grpcStore) Release(ctx context.Context, id, digest string) error {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	_, err := g.leases.DeleteResource(cctx, &leasesapi.DeleteResourceRequest{ID: id, Resource: &leasesapi.Resource{ID: digest, Type: contentResource}})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("release %s from lease %s: %w", digest, id, err)
	}
	return nil
}

func (g *grpcStore) DeleteLease(ctx context.Context, id string) error {
	cctx, cancel := g.src.call(ctx)
	defer cancel()
	_, err := g.leases.Delete(cctx, &leasesapi.DeleteRequest{ID: id})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete lease %s: %w", id, err)
	}
	return nil
}

// ImageEvents subscribes without a call timeout: the stream lives as long as ctx.
func (g *grpcStore) ImageEvents(ctx context.Context, fn func(Event)) error {
	stream, err := g.events.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: []string{
		fmt.Sprintf(`namespace==%q,topic~="^/images/"`, g.src.cfg.Namespace),
	}})
	if err != nil {
		return fmt.Errorf("subscribe to image events: %w", err)
	}
	for {
		env, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("image events: %w", err)
		}
		ev := Event{Topic: env.GetTopic(), At: env.GetTimestamp().AsTime()}
		switch ev.Topic {
		case TopicImageCreate:
			var m eventsv1.ImageCreate
			if proto.Unmarshal(env.GetEvent().GetValue(), &m) == nil {
				ev.Name, ev.Labels = m.GetName(), m.GetLabels()
			}
		case TopicImageUpdate:
			var m eventsv1.ImageUpdate
			if proto.Unmarshal(env.GetEvent().GetValue(), &m) == nil {
				ev.Name, ev.Labels = m.GetName(), m.GetLabels()
			}
		case TopicImageDelete:
			var m eventsv1.ImageDelete
			if proto.Unmarshal(env.GetEvent().GetValue(), &m) == nil {
				ev.Name = m.GetName()
			}
		default:
			continue
		}
		fn(ev)
	}
}
