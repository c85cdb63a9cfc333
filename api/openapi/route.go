package openapi

// Route is one operation of the API: what a request carries and what each
// status returns. The server keeps its table of Routes beside the mux
// registrations so the two are read (and tested) together.
type Route struct {
	Method string // "GET", "POST", ...
	// Path is the mux pattern's path: "/v1/runs/{id}/tools/{name}". Each
	// {wildcard} is a required string path parameter.
	Path        string
	ID          string // operationId; unique
	Summary     string
	Description string
	Tags        []string
	// Public routes need no bearer token.
	Public bool
	// Planned marks an endpoint being added: the server lists it only once
	// its mux serves it, and tests do not require it to be served.
	Planned bool
	Query   []Param
	Headers []Param // request headers that change the response (Accept, ...)
	// Body is a value of the request body's Go type (nil: no body), or
	// BodySchema a schema given by hand (a tool's own arguments).
	Body         any
	BodySchema   *Schema
	BodyOptional bool
	BodyDesc     string
	Responses    []Response
	// Errors are the statuses this route responds with the error body,
	// besides the "default" response every route has.
	Errors []int
}

// Param is a query or header parameter; path parameters come from the path.
type Param struct {
	Name        string
	Description string
	Required    bool
	Schema      *Schema // default: a string
}

// Response is what one status carries. A JSON body is Body (a value of its Go
// type) or Schema; Events make the response (also) a text/event-stream of
// those events. A response with neither has no body.
type Response struct {
	Status      int
	Description string
	Body        any
	Schema      *Schema
	// ContentType of the non-stream body; default application/json.
	ContentType string
	Events      []Event
	StreamDesc  string
}

// Event is one named event of a Server-Sent Events stream.
type Event struct {
	Name        string
	Data        any // a value of the Go type of the event's JSON data
	Description string
}

// Media types the document uses.
const (
	MediaJSON   = "application/json"
	MediaStream = "text/event-stream"
)

// EventsKey is the Media Type extension of a text/event-stream response that
// maps each event name to the schema of its data. OpenAPI 3.1 has no words
// for the items of a stream; this names them the way tools can read.
const EventsKey = "x-sse-events"
