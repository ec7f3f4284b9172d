package jupyter

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// kernelSpec is one kiln language with a REPL kernel, as Jupyter names it.
type kernelSpec struct {
	Name     string // the kernelspec name: python3 for Python, else kiln's name
	Language string // kiln's language name
	Display  string
	info     languageInfo
}

// languageInfo is kernel_info_reply's language_info.
type languageInfo struct {
	Name              string `json:"name"`
	Version           string `json:"version"`
	Mimetype          string `json:"mimetype"`
	FileExtension     string `json:"file_extension"`
	PygmentsLexer     string `json:"pygments_lexer,omitempty"`
	CodemirrorMode    any    `json:"codemirror_mode,omitempty"`
	NbconvertExporter string `json:"nbconvert_exporter,omitempty"`
}

// Front-end hints per language; a language not named here gets plain
// text ones, so a new REPL language in the registry is served anyway.
var hints = map[string]languageInfo{
	"python":     {Mimetype: "text/x-python", PygmentsLexer: "ipython3", CodemirrorMode: map[string]any{"name": "ipython", "version": 3}, NbconvertExporter: "python"},
	"javascript": {Mimetype: "application/javascript", PygmentsLexer: "javascript", CodemirrorMode: "javascript"},
	"typescript": {Mimetype: "text/typescript", PygmentsLexer: "typescript", CodemirrorMode: "typescript"},
	"bash":       {Mimetype: "text/x-sh", PygmentsLexer: "bash", CodemirrorMode: "shell"},
	"sql":        {Mimetype: "text/x-sql", PygmentsLexer: "sql", CodemirrorMode: "sql"},
	"postgres":   {Mimetype: "text/x-pgsql", PygmentsLexer: "postgresql", CodemirrorMode: "sql"},
}

var displayNames = map[string]string{"python": "Python 3", "javascript": "JavaScript (Node.js)", "typescript": "TypeScript",
	"bash": "Bash", "sql": "SQL (SQLite)", "postgres": "PostgreSQL"}

// versionNumber is the version in a runtime's version line ("Python
// 3.11.2", "v20.20.2"), as language_info wants it: "3.11.2", "20.20.2".
var versionNumber = regexp.MustCompile(`\d+(\.\d+)+`)

// specName is the kernelspec name of a kiln language. Python's is
// python3, the name every saved notebook and front end defaults to.
func specName(language string) string {
	if language == "python" {
		return "python3"
	}
	return language
}

// kernelSpecs are the kiln languages with a REPL kernel whose runtime is
// installed, probed once (each version probe starts the runtime).
func (g *Gateway) kernelSpecs() []kernelSpec {
	g.langOnce.Do(func() {
		for _, l := range lang.All() {
			if l.Kind != lang.REPL || l.Kernel == nil || l.Available() != nil {
				continue
			}
			info := hints[l.Name]
			info.Name = l.Name
			info.FileExtension = l.Ext
			if info.Mimetype == "" {
				info.Mimetype = "text/plain"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if v, err := l.DetectVersion(ctx); err == nil {
				info.Version = versionNumber.FindString(v)
			}
			cancel()
			display := displayNames[l.Name]
			if display == "" {
				display = l.Name
			}
			g.specs = append(g.specs, kernelSpec{Name: specName(l.Name), Language: l.Name, Display: display + " (kiln)", info: info})
		}
	})
	return g.specs
}

// spec finds a kernelspec by its name, or by a kiln language name or
// alias ("python", "js").
func (g *Gateway) spec(name string) (kernelSpec, error) {
	specs := g.kernelSpecs()
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	if l, err := lang.Lookup(name); err == nil {
		for _, s := range specs {
			if s.Language == l.Name {
				return s, nil
			}
		}
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return kernelSpec{}, kiln.Errorf(kiln.NotFound, "no kernelspec %q; this kiln has: %s", trunc(name, 100), strings.Join(names, ", "))
}

func (g *Gateway) defaultSpec() string {
	specs := g.kernelSpecs()
	for _, s := range specs {
		if s.Name == "python3" {
			return s.Name
		}
	}
	if len(specs) > 0 {
		return specs[0].Name
	}
	return ""
}

// model is the REST form of a kernelspec, as Jupyter Server gives it.
func (s kernelSpec) model() map[string]any {
	return map[string]any{
		"name": s.Name,
		"spec": map[string]any{
			"argv":           []string{},
			"display_name":   s.Display,
			"language":       s.info.Name,
			"interrupt_mode": "message",
			"env":            map[string]string{},
			"metadata":       map[string]any{"kiln": map[string]string{"language": s.Language}},
		},
		"resources": map[string]string{},
	}
}

func (g *Gateway) listSpecs(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	specs := map[string]any{}
	for _, s := range g.kernelSpecs() {
		specs[s.Name] = s.model()
	}
	return writeJSON(w, http.StatusOK, map[string]any{"default": g.defaultSpec(), "kernelspecs": specs})
}

func (g *Gateway) getSpec(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	s, err := g.spec(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.model())
}

// specResource: kiln's kernelspecs have no resources (logos, kernel.js);
// a front end falls back to its own.
func (g *Gateway) specResource(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	if _, err := g.spec(r.PathValue("name")); err != nil {
		return err
	}
	return kiln.Errorf(kiln.NotFound, "kernelspec %q has no resource %q", trunc(r.PathValue("name"), 100), trunc(r.PathValue("path"), 100))
}
