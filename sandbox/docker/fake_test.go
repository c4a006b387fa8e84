package docker

import (
	"context"
	"io"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"
)

// fakeClient is a Client whose methods are function fields; a nil field panics, so a
// test states every call it expects. The fields take and return the API's types, not the
// client's option and result wrappers, which the methods below unwrap.
type fakeClient struct {
	list       func(client.ContainerListOptions) ([]container.Summary, error)
	inspect    func(id string) (container.InspectResponse, error)
	create     func(cfg *container.Config, hc *container.HostConfig, name string) (container.CreateResponse, error)
	start      func(id string) error
	remove     func(id string, opts client.ContainerRemoveOptions) error
	rename     func(id, name string) error
	statPath   func(id, path string) (container.PathStat, error)
	copyFrom   func(id, path string) (io.ReadCloser, container.PathStat, error)
	copyTo     func(id, path string, content io.Reader, opts client.CopyToContainerOptions) error
	execCreate func(id string, opts client.ExecCreateOptions) (container.ExecCreateResponse, error)
	execAttach func(execID string) (client.HijackedResponse, error)
	execInsp   func(execID string) (client.ExecInspectResult, error)
	imgInspect func(ref string) (image.InspectResponse, error)
	imgBuild   func(ctx io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error)
	info       func() (client.SystemInfoResult, error)
	volList    func(client.VolumeListOptions) ([]volume.Volume, error)
	volRemove  func(name string, force bool) error
}

var _ Client = (*fakeClient)(nil)

func (f *fakeClient) ContainerList(_ context.Context, o client.ContainerListOptions) (client.ContainerListResult, error) {
	items, err := f.list(o)
	return client.ContainerListResult{Items: items}, err
}
func (f *fakeClient) ContainerInspect(_ context.Context, id string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	r, err := f.inspect(id)
	return client.ContainerInspectResult{Container: r}, err
}
func (f *fakeClient) ContainerCreate(_ context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	r, err := f.create(o.Config, o.HostConfig, o.Name)
	return client.ContainerCreateResult{ID: r.ID, Warnings: r.Warnings}, err
}
func (f *fakeClient) ContainerStart(_ context.Context, id string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	return client.ContainerStartResult{}, f.start(id)
}
func (f *fakeClient) ContainerRemove(_ context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	return client.ContainerRemoveResult{}, f.remove(id, o)
}
func (f *fakeClient) ContainerRename(_ context.Context, id string, o client.ContainerRenameOptions) (client.ContainerRenameResult, error) {
	return client.ContainerRenameResult{}, f.rename(id, o.NewName)
}
func (f *fakeClient) ContainerStatPath(_ context.Context, id string, o client.ContainerStatPathOptions) (client.ContainerStatPathResult, error) {
	st, err := f.statPath(id, o.Path)
	return client.ContainerStatPathResult{Stat: st}, err
}
func (f *fakeClient) CopyFromContainer(_ context.Context, id string, o client.CopyFromContainerOptions) (client.CopyFromContainerResult, error) {
	rc, st, err := f.copyFrom(id, o.SourcePath)
	return client.CopyFromContainerResult{Content: rc, Stat: st}, err
}
func (f *fakeClient) CopyToContainer(_ context.Context, id string, o client.CopyToContainerOptions) (client.CopyToContainerResult, error) {
	return client.CopyToContainerResult{}, f.copyTo(id, o.DestinationPath, o.Content, o)
}
func (f *fakeClient) ExecCreate(_ context.Context, id string, o client.ExecCreateOptions) (client.ExecCreateResult, error) {
	r, err := f.execCreate(id, o)
	return client.ExecCreateResult{ID: r.ID}, err
}
func (f *fakeClient) ExecAttach(_ context.Context, execID string, _ client.ExecAttachOptions) (client.ExecAttachResult, error) {
	hj, err := f.execAttach(execID)
	return client.ExecAttachResult{HijackedResponse: hj}, err
}
func (f *fakeClient) ExecInspect(_ context.Context, execID string, _ client.ExecInspectOptions) (client.ExecInspectResult, error) {
	return f.execInsp(execID)
}
func (f *fakeClient) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	r, err := f.imgInspect(ref)
	return client.ImageInspectResult{InspectResponse: r}, err
}
func (f *fakeClient) ImageBuild(_ context.Context, r io.Reader, o client.ImageBuildOptions) (client.ImageBuildResult, error) {
	return f.imgBuild(r, o)
}
func (f *fakeClient) Info(context.Context, client.InfoOptions) (client.SystemInfoResult, error) {
	return f.info()
}
func (f *fakeClient) VolumeList(_ context.Context, o client.VolumeListOptions) (client.VolumeListResult, error) {
	items, err := f.volList(o)
	return client.VolumeListResult{Items: items}, err
}
func (f *fakeClient) VolumeRemove(_ context.Context, name string, o client.VolumeRemoveOptions) (client.VolumeRemoveResult, error) {
	return client.VolumeRemoveResult{}, f.volRemove(name, o.Force)
}
