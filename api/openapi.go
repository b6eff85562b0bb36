package api

import _ "embed"

// OpenAPI is the API's OpenAPI 3 document, served at /v1/openapi.json. Its
// schemas are derived from this package's types by TestOpenAPIDocument
// (go test ./api -run TestOpenAPIDocument -update rewrites it); ctld's
// tests check that it names every route the controllers serve and that
// real requests and answers validate against it.
//
//go:embed openapi.json
var OpenAPI []byte
