package browser_test

import "testing"

// TestLongOutputInBrowser runs web/test/output.mjs: a 100,000-line output
// is a virtual view with only the lines in view in the page, which
// scrolls, expands and downloads whole; a cell cut at a 4 KiB output
// limit says where it was cut and how to keep all of the output, and
// that kiln stored no more; a cell printing more than the notebook keeps
// inline (1 MiB) is marked, and expanding it shows the stored output's
// last line.
func TestLongOutputInBrowser(t *testing.T) {
	runScript(t, "output.mjs", "OUTPUT OK")
}
