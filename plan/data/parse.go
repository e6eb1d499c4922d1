package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/switchyard-nix/switchyard/plan/field"
)

// MaxDepth bounds the nesting of parsed JSON.
const MaxDepth = 64

// Parse reads exactly one JSON value, strictly: invalid UTF-8, a duplicate key, nesting
// deeper than MaxDepth and anything after the value are refused. Numbers stay
// json.Number; objects are map[string]any, arrays []any. Refusals are *field.Error
// naming the path reached.
func Parse(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, field.Errorf("", "not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, field.Errorf("", "not JSON: data after the value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, at field.Path, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, field.Errorf(at, "not JSON: unexpected end of input")
		}
		return nil, field.Errorf(at, "not JSON: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return nil, field.Errorf(at, "nested deeper than %d", MaxDepth)
		}
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, field.Errorf(at, "not JSON: %v", err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, field.Errorf(at, "not JSON: object key %v", kt)
				}
				if _, dup := obj[k]; dup {
					return nil, field.Errorf(at.Key(k), "duplicate key")
				}
				v, err := parseValue(dec, at.Key(k), depth+1)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, field.Errorf(at, "not JSON: %v", err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; dec.More(); i++ {
				v, err := parseValue(dec, at.Index(i), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, field.Errorf(at, "not JSON: %v", err)
			}
			return arr, nil
		}
		return nil, field.Errorf(at, "not JSON: unexpected %v", t)
	case string, bool, nil, json.Number:
		return t, nil
	}
	return nil, field.Errorf(at, "not JSON: unexpected token %v", fmt.Sprint(tok))
}
