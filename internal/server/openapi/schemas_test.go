package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/client"
)

// wireTypes are the Go types that the schemas describe. A schema here
// must list exactly the type's JSON fields, require exactly those without
// omitempty, and give each the JSON type Go encodes it as.
var wireTypes = map[string]reflect.Type{
	"Limits":            reflect.TypeFor[client.Limits](),
	"SessionRequest":    reflect.TypeFor[client.SessionRequest](),
	"Session":           reflect.TypeFor[client.Session](),
	"SessionUpdate":     reflect.TypeFor[client.SessionUpdate](),
	"SessionUse":        reflect.TypeFor[client.SessionUse](),
	"CompleteRequest":   reflect.TypeFor[client.CompleteRequest](),
	"Completion":        reflect.TypeFor[client.Completion](),
	"FormatRequest":     reflect.TypeFor[client.FormatRequest](),
	"Formatted":         reflect.TypeFor[client.Formatted](),
	"GitStatus":         reflect.TypeFor[client.GitStatus](),
	"GitFile":           reflect.TypeFor[client.GitFile](),
	"GitDiff":           reflect.TypeFor[client.GitDiff](),
	"GitStageRequest":   reflect.TypeFor[client.GitStageRequest](),
	"GitCommitRequest":  reflect.TypeFor[client.GitCommitRequest](),
	"GitCommit":         reflect.TypeFor[client.GitCommit](),
	"GitLog":            reflect.TypeFor[client.GitLog](),
	"GitRestoreRequest": reflect.TypeFor[client.GitRestoreRequest](),
	"GitBundleRequest":  reflect.TypeFor[client.GitBundleRequest](),
	"SessionList":       reflect.TypeFor[client.SessionList](),
	"ShareRequest":      reflect.TypeFor[client.ShareRequest](),
	"Share":             reflect.TypeFor[client.Share](),
	"ShareList":         reflect.TypeFor[client.ShareList](),
	"ExecRequest":       reflect.TypeFor[client.ExecRequest](),
	"Execution":         reflect.TypeFor[client.Execution](),
	"ExecutionList":     reflect.TypeFor[client.ExecutionList](),
	"Event":             reflect.TypeFor[client.Event](),
	"WSMessage":         reflect.TypeFor[client.WSMessage](),
	"RunRequest":        reflect.TypeFor[client.RunRequest](),
	"File":              reflect.TypeFor[client.File](),
	"RunResult":         reflect.TypeFor[client.RunResult](),
	"BatchRequest":      reflect.TypeFor[client.BatchRequest](),
	"BatchItem":         reflect.TypeFor[client.BatchItem](),
	"BatchCheck":        reflect.TypeFor[client.BatchCheck](),
	"BatchItemResult":   reflect.TypeFor[client.BatchItemResult](),
	"Batch":             reflect.TypeFor[client.Batch](),
	"BatchItemList":     reflect.TypeFor[client.BatchItemList](),
	"BatchEvent":        reflect.TypeFor[client.BatchEvent](),
	"FileInfo":          reflect.TypeFor[client.FileInfo](),
	"FileList":          reflect.TypeFor[client.FileList](),
	"MoveRequest":       reflect.TypeFor[client.MoveRequest](),
	"Uploaded":          reflect.TypeFor[client.Uploaded](),
	"Language":          reflect.TypeFor[client.Language](),
	"UserRequest":       reflect.TypeFor[client.UserRequest](),
	"User":              reflect.TypeFor[client.User](),
	"Quota":             reflect.TypeFor[client.Quota](),
	"UserUsage":         reflect.TypeFor[client.UserUsage](),
	"KeyRequest":        reflect.TypeFor[client.KeyRequest](),
	"Key":               reflect.TypeFor[client.Key](),
	"Problem":           reflect.TypeFor[client.Problem](),
	"CellResult":        reflect.TypeFor[client.CellResult](),
	"CellStatus":        reflect.TypeFor[client.CellStatus](),
	"Output":            reflect.TypeFor[client.Output](),
	"CellError":         reflect.TypeFor[client.CellError](),
	"Diagnostic":        reflect.TypeFor[client.Diagnostic](),
	"TestReport":        reflect.TypeFor[client.TestReport](),
	"TestCase":          reflect.TypeFor[client.TestCase](),
	"Artifact":          reflect.TypeFor[client.Artifact](),
	"Usage":             reflect.TypeFor[client.Usage](),
	"NetworkPolicy":     reflect.TypeFor[client.NetworkPolicy](),
	"EgressRecord":      reflect.TypeFor[client.EgressRecord](),
	"AuditEntry":        reflect.TypeFor[client.AuditEntry](),
	"AuditList":         reflect.TypeFor[client.AuditList](),
	"ToolCall":          reflect.TypeFor[client.ToolCall](),
	"ToolCallResult":    reflect.TypeFor[client.ToolCallResult](),
	"ToolContent":       reflect.TypeFor[client.ToolContent](),
	"PackageRequest":    reflect.TypeFor[client.PackageRequest](),
	"PackageResult":     reflect.TypeFor[client.PackageResult](),
	"InstalledPackage":  reflect.TypeFor[client.InstalledPackage](),
	"PackageVersion":    reflect.TypeFor[client.PackageVersion](),
	"Environment":       reflect.TypeFor[client.Environment](),
	"EnvironmentBuild":  reflect.TypeFor[client.EnvironmentBuild](),
}

// noWireType are schemas without a Go type in package client yet.
var noWireType = map[string]bool{"MkdirRequest": true, "UploadForm": true,
	// The function definitions are internal/tools' (two formats in one schema).
	"ToolDefinition": true, "ToolFunction": true}

func TestSchemasMatchWireTypes(t *testing.T) {
	d := document(t)
	schemas := mustResolve(t, d, "#/components/schemas").(map[string]any)
	for name := range schemas {
		if wireTypes[name] == nil && !noWireType[name] {
			t.Errorf("schema %s: no Go type to check it against; add it to wireTypes", name)
		}
	}
	for name, typ := range wireTypes {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s for %v", name, typ)
			continue
		}
		if got, want := s["type"], jsonType(typ); got != want {
			t.Errorf("schema %s: type %v, want %v", name, got, want)
		}
		if typ.Kind() != reflect.Struct {
			continue
		}
		props, _ := s["properties"].(map[string]any)
		var gotRequired []string
		for _, r := range asSlice(s["required"]) {
			gotRequired = append(gotRequired, r.(string))
		}
		var names, required []string
		for _, f := range reflect.VisibleFields(typ) {
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			field, opts, _ := strings.Cut(tag, ",")
			names = append(names, field)
			if !slices.Contains(strings.Split(opts, ","), "omitempty") {
				required = append(required, field)
			}
			p, ok := props[field]
			if !ok {
				continue // reported with the names below
			}
			// A schema without a type takes any JSON value.
			got, _ := deref(t, d, p)["type"].(string)
			if want := jsonType(f.Type); got != want {
				t.Errorf("schema %s: property %s has type %v, want %v (Go %v)", name, field, got, want, f.Type)
			}
		}
		var gotNames []string
		for p := range props {
			gotNames = append(gotNames, p)
		}
		for _, l := range [][]string{names, required, gotNames, gotRequired} {
			slices.Sort(l)
		}
		if diff := cmp.Diff(names, gotNames); diff != "" {
			t.Errorf("schema %s properties (-Go +schema):\n%s", name, diff)
		}
		if diff := cmp.Diff(required, gotRequired); diff != "" {
			t.Errorf("schema %s required (-Go without omitempty +schema):\n%s", name, diff)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// jsonType is the JSON Schema type encoding/json gives a Go type.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		return "" // any JSON value
	case t == reflect.TypeFor[time.Time]():
		return "string"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "string" // base64
	case t == reflect.TypeFor[time.Duration]():
		return "number" // milliseconds, by kiln.Usage's MarshalJSON
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "unknown " + t.String()
}
