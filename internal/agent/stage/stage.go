// Package stage runs a sandbox stage of the kiln binary (agent.Dispatch)
// from a package init, before the packages that a sandbox stage does not
// use are initialized: Go initializes a program's packages in
// dependency order, the lexically first ready one first, so this one,
// which needs only the agent's, comes before the server's, the stores',
// the metrics', Markdown's and the rest. A sandbox starts two processes
// of the binary (the boot stage and the spawn stage), and those inits
// were about half of each one's start. Import it for its effect, first
// in the main package of a binary that makes sandboxes.
package stage

import "github.com/kiln-dev/kiln/internal/agent"

func init() { agent.Dispatch() }
