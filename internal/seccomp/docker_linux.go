//go:build amd64 || arm64

package seccomp

import "runtime"

// Docker is kiln's seccomp profile for containers on this architecture,
// as JSON for --security-opt seccomp=.
func Docker() ([]byte, error) {
	scmp := map[string]string{"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64"}[runtime.GOARCH]
	p, err := dockerProfile(Rules, native, scmp)
	if err != nil {
		return nil, err
	}
	return MarshalDockerProfile(p)
}
