package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json from the package's types")

// TestOpenAPIDocument fails when api/openapi.json is not what the
// package's types and the endpoint table (openapi_gen_test.go) make of it:
// a wire type changed without the document. Run
// `go test ./api -run TestOpenAPIDocument -update` to rewrite it.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := openAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile("openapi.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(b, OpenAPI) {
		t.Fatal("api/openapi.json is not what the package's types make: run go test ./api -run TestOpenAPIDocument -update, and review the diff")
	}
}

// TestOpenAPIEveryTypeDescribed checks that every type the endpoint table
// names became a schema and that every schema is used.
func TestOpenAPIEveryTypeDescribed(t *testing.T) {
	doc, err := openAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc["paths"])
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	all, _ := json.Marshal(comps)
	for name := range comps {
		ref := []byte(`"#/components/schemas/` + name + `"`)
		if !bytes.Contains(b, ref) && !bytes.Contains(all, ref) {
			t.Errorf("schema %s is used by no path", name)
		}
	}
	if len(comps) < 30 {
		t.Errorf("only %d schemas; the wire types are more", len(comps))
	}
}
