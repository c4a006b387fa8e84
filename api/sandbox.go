package api

// Sandbox types, as named in SandboxSpec.Type.
const (
	SandboxVirtual = "virtual"
	SandboxLocal   = "local"
	SandboxDocker  = "docker"
)

// SandboxSpec declares the sandbox a run (or an agent) acts in. It travels in workflow
// input, so it holds no secrets. The worker turns it into a sandbox.Sandbox.
type SandboxSpec struct {
	// Type is virtual, local or docker. Empty means local.
	Type string `json:"type,omitempty" mapstructure:"type" yaml:"type"`
	// Dir is the host directory of a local sandbox. Empty means a fresh directory per run
	// under the worker's workspace root, owned by the run and removed when it ends.
	Dir string `json:"dir,omitempty" mapstructure:"dir" yaml:"dir"`
}
