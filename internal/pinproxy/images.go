package pinproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// call forwards a unary RPC's request frame unchanged and decodes the backend's
// answer into resp; it returns the request frame, the backend's header and trailer.
func (p *Proxy) call(ctx context.Context, ss grpc.ServerStream, method string, resp proto.Message) (req frame, hdr, trl metadata.MD, err error) {
	if err := ss.RecvMsg(&req); err != nil {
		return req, nil, nil, err
	}
	var raw frame
	err = p.conn.Invoke(ctx, method, &req, &raw, grpc.ForceCodec(rawCodec{}), grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		return req, nil, nil, err
	}
	if err := proto.Unmarshal(raw.payload, resp); err != nil {
		return req, nil, nil, status.Errorf(codes.Internal, "proxy: decode the backend's %s answer: %v", method, err)
	}
	return req, hdr, trl, nil
}

// reply sends resp with the backend's header and trailer.
func reply(ss grpc.ServerStream, resp proto.Message, hdr, trl metadata.MD) error {
	if len(hdr) > 0 {
		if err := ss.SendHeader(hdr); err != nil {
			return err
		}
	}
	ss.SetTrailer(trl)
	return ss.SendMsg(resp)
}

// listImages answers the backend's list with each image pinned when the backend or one
// of our sources pins it. When a source has no usable state the whole answer is
// Unavailable: a list showing pinned images unpinned would let kubelet's GC delete them.
func (p *Proxy) listImages(ctx context.Context, ss grpc.ServerStream) error {
	var resp runtimeapi.ListImagesResponse
	_, hdr, trl, err := p.call(ctx, ss, listImagesMethod, &resp)
	if err != nil {
		return err
	}
	labels, err := p.engine.ImageLabels(ctx)
	if err != nil {
		return errgrpc.ToGRPC(fmt.Errorf("list images: read image labels from the engine: %w", err))
	}
	npinned, err := p.pinImages(ctx, resp.Images, labels)
	if err != nil {
		return errgrpc.ToGRPC(fmt.Errorf("list images: %w", err))
	}
	logctx.For(ctx, p.log).WithField("images", len(resp.Images)).WithField("pinned", npinned).Debug("listed images through the backend")
	return reply(ss, &resp, hdr, trl)
}

// pinImages marks imgs pinned when the backend or one of our sources pins them, with
// labels (by image ID) from the engine; it returns how many are pinned. It fails when a
// source has no usable state or an image's labels cannot be read.
func (p *Proxy) pinImages(ctx context.Context, imgs []*runtimeapi.Image, labels map[string]map[string]string) (int, error) {
	views := make([]pin.Image, len(imgs))
	for i, img := range imgs {
		l, ok := labels[img.GetId()]
		if !ok { // not indexed yet (pulled a moment ago): without its labels it could look unpinned
			var err error
			if l, err = p.engine.ImageLabelsOf(ctx, img.GetId()); err != nil && !cerrdefs.IsNotFound(err) {
				return 0, fmt.Errorf("read the labels of image %s from the engine: %w", img.GetId(), err)
			}
		}
		views[i] = view(img, l)
	}
	reasons, err := p.pins.Evaluate(ctx, views)
	if err != nil {
		return 0, err
	}
	npinned := 0
	for i, img := range imgs {
		img.Pinned = img.Pinned || len(reasons[i]) > 0
		if img.Pinned {
			npinned++
		}
	}
	return npinned, nil
}

// streamImages relays the backend's StreamImages (KEP-5825) with each chunk's images
// pinned as listImages pins them; a chunk that cannot be pinned ends the stream with
// the error, so that kubelet discards it rather than see pinned images unpinned.
func (p *Proxy) streamImages(ctx context.Context, ss grpc.ServerStream) error {
	var req frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, streamImagesMethod, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&req); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if md, err := cs.Header(); err == nil && len(md) > 0 {
		if err := ss.SendHeader(md); err != nil {
			return err
		}
	}
	var labels map[string]map[string]string
	images, npinned := 0, 0
	for {
		var raw frame
		if err := cs.RecvMsg(&raw); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				logctx.For(ctx, p.log).WithField("images", images).WithField("pinned", npinned).Debug("streamed images through the backend")
				return nil
			}
			return err // the backend's status, or Unavailable when it is gone
		}
		var chunk runtimeapi.StreamImagesResponse
		if err := proto.Unmarshal(raw.payload, &chunk); err != nil {
			return status.Errorf(codes.Internal, "proxy: decode the backend's %s answer: %v", streamImagesMethod, err)
		}
		if labels == nil {
			if labels, err = p.engine.ImageLabels(ctx); err != nil {
				return errgrpc.ToGRPC(fmt.Errorf("stream images: read image labels from the engine: %w", err))
			}
		}
		n, err := p.pinImages(ctx, chunk.Images, labels)
		if err != nil {
			return errgrpc.ToGRPC(fmt.Errorf("stream images: %w", err))
		}
		images, npinned = images+len(chunk.Images), npinned+n
		if err := ss.SendMsg(&chunk); err != nil {
			return err
		}
	}
}

// imageStatus answers the backend's status with the image pinned when the backend or
// one of our sources pins it. Like ImageStatus itself it never fails for pinning: a
// source without state, or labels the engine cannot give, add no reason.
func (p *Proxy) imageStatus(ctx context.Context, ss grpc.ServerStream) error {
	var resp runtimeapi.ImageStatusResponse
	raw, hdr, trl, err := p.call(ctx, ss, imageStatusMethod, &resp)
	if err != nil {
		return err
	}
	img := resp.GetImage()
	if img == nil {
		return reply(ss, &resp, hdr, trl)
	}
	log := logctx.For(ctx, p.log)
	labels, err := p.engine.ImageLabelsOf(ctx, img.Id)
	if err != nil && !cerrdefs.IsNotFound(err) {
		log.WithError(err).Warn("image status: cannot read the image's labels from the engine; deciding its pins without them")
	}
	reasons := p.pins.Check(ctx, view(img, labels))
	img.Pinned = img.Pinned || len(reasons) > 0
	var req runtimeapi.ImageStatusRequest
	if proto.Unmarshal(raw.payload, &req) == nil && req.Verbose && len(reasons) > 0 {
		// An object, which crictl inspecti shows as JSON (any other value stays a string).
		b, err := json.Marshal(struct {
			PinReasons []pin.Reason `json:"pinReasons"`
		}{reasons})
		if err == nil {
			if resp.Info == nil {
				resp.Info = map[string]string{}
			}
			resp.Info["pinProxy"] = string(b)
		}
	}
	return reply(ss, &resp, hdr, trl)
}

func view(img *runtimeapi.Image, labels map[string]string) pin.Image {
	return pin.Image{ID: img.GetId(), RepoTags: img.GetRepoTags(), RepoDigests: img.GetRepoDigests(), Labels: labels}
}

// status answers the backend's Status; verbose (crictl info), with our pinning state
// under "pinning" (in place of the backend's, if it has one: ours decides what kubelet
// sees) and the backend under "pinProxy".
func (p *Proxy) status(ctx context.Context, ss grpc.ServerStream) error {
	var resp runtimeapi.StatusResponse
	raw, hdr, trl, err := p.call(ctx, ss, statusMethod, &resp)
	if err != nil {
		return err
	}
	var req runtimeapi.StatusRequest
	if proto.Unmarshal(raw.payload, &req) == nil && req.Verbose {
		if resp.Info == nil {
			resp.Info = map[string]string{}
		}
		for k, v := range map[string]any{"pinning": p.pins.Info(), "pinProxy": map[string]string{"backend": p.target}} {
			b, err := json.Marshal(v)
			if err != nil {
				return status.Errorf(codes.Internal, "status: %v", err)
			}
			resp.Info[k] = string(b)
		}
	}
	return reply(ss, &resp, hdr, trl)
}
