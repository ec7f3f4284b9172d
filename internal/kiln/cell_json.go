package kiln

import "encoding/json"

// MarshalJSON writes missing outputs and artifacts as empty lists, never
// null: the API documents both as arrays, and a result made without a
// run (e.g. an execution recovered as interrupted after a restart) has
// neither.
func (r CellResult) MarshalJSON() ([]byte, error) {
	type plain CellResult // without this method
	p := plain(r)
	if p.Outputs == nil {
		p.Outputs = []Output{}
	}
	if p.Artifacts == nil {
		p.Artifacts = []Artifact{}
	}
	return json.Marshal(p)
}
