// Package web holds the web notebook's built assets (dist/ui, made by
// `npm run build` in this directory), embedded in the kiln binary. A clone
// that never ran the build has only dist/NOT-BUILT.txt, so `go build`
// works without Node.js and the server says the UI was not built.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// UI is the built notebook (index.html and assets/), and false when it was
// not built.
func UI() (fs.FS, bool) {
	sub, err := fs.Sub(dist, "dist/ui")
	if err != nil {
		return nil, false
	}
	if _, err := fs.Stat(sub, "index.html"); err != nil {
		return nil, false
	}
	return sub, true
}
