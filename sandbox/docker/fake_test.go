package docker

import (
	"context"
	"io"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeClient is a Client whose methods are function fields; a nil field panics, so a
// test states every call it expects.
type fakeClient struct {
	list       func(container.ListOptions) ([]container.Summary, error)
	inspect    func(id string) (container.InspectResponse, error)
	create     func(cfg *container.Config, hc *container.HostConfig, name string) (container.CreateResponse, error)
	start      func(id string) error
	remove     func(id string, opts container.RemoveOptions) error
	statPath   func(id, path string) (container.PathStat, error)
	copyFrom   func(id, path string) (io.ReadCloser, container.PathStat, error)
	copyTo     func(id, path string, content io.Reader, opts container.CopyToContainerOptions) error
	execCreate func(id string, opts container.ExecOptions) (container.ExecCreateResponse, error)
	execAttach func(execID string) (types.HijackedResponse, error)
	execInsp   func(execID string) (container.ExecInspect, error)
	imgInspect func(ref string) (image.InspectResponse, error)
	imgBuild   func(ctx io.Reader, opts build.ImageBuildOptions) (build.ImageBuildResponse, error)
	volList    func(volume.ListOptions) (volume.ListResponse, error)
	volRemove  func(name string, force bool) error
}

var _ Client = (*fakeClient)(nil)

func (f *fakeClient) ContainerList(_ context.Context, o container.ListOptions) ([]container.Summary, error) {
	return f.list(o)
}
func (f *fakeClient) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	return f.inspect(id)
}
func (f *fakeClient) ContainerCreate(_ context.Context, cfg *container.Config, hc *container.HostConfig,
	_ *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	return f.create(cfg, hc, name)
}
func (f *fakeClient) ContainerStart(_ context.Context, id string, _ container.StartOptions) error {
	return f.start(id)
}
func (f *fakeClient) ContainerRemove(_ context.Context, id string, o container.RemoveOptions) error {
	return f.remove(id, o)
}
func (f *fakeClient) ContainerStatPath(_ context.Context, id, p string) (container.PathStat, error) {
	return f.statPath(id, p)
}
func (f *fakeClient) CopyFromContainer(_ context.Context, id, p string) (io.ReadCloser, container.PathStat, error) {
	return f.copyFrom(id, p)
}
func (f *fakeClient) CopyToContainer(_ context.Context, id, p string, r io.Reader, o container.CopyToContainerOptions) error {
	return f.copyTo(id, p, r, o)
}
func (f *fakeClient) ContainerExecCreate(_ context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	return f.execCreate(id, o)
}
func (f *fakeClient) ContainerExecAttach(_ context.Context, execID string, _ container.ExecAttachOptions) (types.HijackedResponse, error) {
	return f.execAttach(execID)
}
func (f *fakeClient) ContainerExecInspect(_ context.Context, execID string) (container.ExecInspect, error) {
	return f.execInsp(execID)
}
func (f *fakeClient) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	return f.imgInspect(ref)
}
func (f *fakeClient) ImageBuild(_ context.Context, r io.Reader, o build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	return f.imgBuild(r, o)
}
func (f *fakeClient) VolumeList(_ context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	return f.volList(o)
}
func (f *fakeClient) VolumeRemove(_ context.Context, name string, force bool) error {
	return f.volRemove(name, force)
}
