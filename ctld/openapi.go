package ctld

import (
	"net/http"

	"corral/api"
)

// handleOpenAPI serves the API's OpenAPI 3 document (api/openapi.json),
// which describes every route of routeTable and jobIORouteTable.
func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(api.OpenAPI)
}
