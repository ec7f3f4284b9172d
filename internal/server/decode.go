package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// decode reads a JSON body of at most limit bytes into v. It refuses other
// content types, unknown fields, trailing data and a body over the limit,
// each with a message that says what was wrong.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &httpError{http.StatusUnsupportedMediaType, codeUnsupportedMedia, fmt.Sprintf("the body must be JSON (Content-Type: application/json), not %q", trunc(ct, 100))}
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return jsonError(err, limit)
		}
		return kiln.Errorf(kiln.Invalid, "the body must hold exactly one JSON value; more follows it")
	}
	return nil
}

func jsonError(err error, limit int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var big *http.MaxBytesError
	var he *httpError
	switch {
	case errors.As(err, &he): // the body came too slowly
		return he
	case errors.As(err, &big):
		return kiln.Errorf(kiln.TooLarge, "the body is over the %s allowed", kiln.FormatBytes(limit))
	case errors.Is(err, io.EOF):
		return kiln.Errorf(kiln.Invalid, "the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return kiln.Errorf(kiln.Invalid, "the JSON body ends too early")
	case errors.As(err, &syn):
		return kiln.Errorf(kiln.Invalid, "the body is not valid JSON (at byte %d): %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return kiln.Errorf(kiln.Invalid, "%s must be %s, not %s", quoteField(field), jsonType(typ.Type.Kind().String()), typ.Value)
	}
	// encoding/json reports unknown fields only as text.
	return kiln.Errorf(kiln.Invalid, "invalid request body: %s", trunc(err.Error(), 200))
}

func quoteField(f string) string {
	if f == "the body" {
		return f
	}
	return strconv.Quote(f)
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "a number"
}

// writeJSON writes v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(r *http.Request, name string, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, kiln.Errorf(kiln.Invalid, "query parameter %s=%q must be a whole number from %d to %d", name, trunc(v, 40), lo, hi)
	}
	return n, nil
}

// boolParam reads an optional true/false query parameter.
func boolParam(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, kiln.Errorf(kiln.Invalid, "query parameter %s=%q must be true or false", name, trunc(v, 40))
	}
	return b, nil
}
