package proto

// OpPorts lists the TCP sockets listening inside the sandbox: Empty ->
// PortsResponse (Response.Ports). A daemon that takes it says so with
// HelloResponse.Ports.
const OpPorts Op = "ports"

// PortsResponse lists the listening TCP sockets, by port, then address.
type PortsResponse struct {
	Ports []ListeningPort `json:"ports"`
}

// ListeningPort is one TCP socket in state LISTEN.
type ListeningPort struct {
	Port int `json:"port"`
	// Address is the address it is bound to: "0.0.0.0", "127.0.0.1",
	// "::", "::1", ...
	Address string `json:"address"`
	// PID and Command are the process holding the socket, when the agent
	// could find it (0 and "" otherwise: a socket of a process it cannot
	// read, or one that closed while it looked).
	PID     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"`
}
