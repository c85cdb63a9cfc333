package api

import "net/http"

// WhoAmI is the response to GET /v1/whoami: whom the token belongs to, so a
// client (the console's header) can say which tenant it acts for.
type WhoAmI struct {
	Tenant string `json:"tenant"`
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, tenant string) error {
	writeJSON(w, http.StatusOK, WhoAmI{Tenant: tenant})
	return nil
}
