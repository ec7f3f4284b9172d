package browser_test

import "testing"

// TestExportHTMLInBrowser runs web/test/export.mjs: Export HTML downloads
// the notebook as one file that, opened from disk, shows its markdown,
// output and plot and runs no script of its HTML output.
func TestExportHTMLInBrowser(t *testing.T) {
	runScript(t, "export.mjs", "EXPORT OK")
}
