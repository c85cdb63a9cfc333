package lsp

import "encoding/json"

// The LSP 3.17/3.18 structures this package speaks, defined here because
// the go.lsp.dev/protocol module on the proxy stops at LSP 3.16 (v0.12.0)
// and lacks position encodings and pull diagnostics. Only the fields used
// are declared; everything else passes through as json.RawMessage.

// Position is zero-based line and character, the character counted in the
// negotiated position encoding.
type Position struct {
	Line      uint32 `json:"line"`
	Character uint32 `json:"character"`
}

// Range is a half-open span of positions.
type Range struct {
	Start Position `json:"start"`
	End   Position `json:"end"`
}

// Location is a range in a document.
type Location struct {
	URI   string `json:"uri"`
	Range Range  `json:"range"`
}

// LocationLink is the richer response some servers give to navigation.
type LocationLink struct {
	OriginSelectionRange *Range `json:"originSelectionRange,omitempty"`
	TargetURI            string `json:"targetUri"`
	TargetRange          Range  `json:"targetRange"`
	TargetSelectionRange Range  `json:"targetSelectionRange"`
}

// Diagnostic is one problem a server reports.
type Diagnostic struct {
	Range    Range           `json:"range"`
	Severity int             `json:"severity,omitempty"`
	Code     json.RawMessage `json:"code,omitempty"`
	Source   string          `json:"source,omitempty"`
	Message  string          `json:"message"`
}

// Diagnostic severities.
const (
	SeverityError       = 1
	SeverityWarning     = 2
	SeverityInformation = 3
	SeverityHint        = 4
)

type publishDiagnosticsParams struct {
	URI         string       `json:"uri"`
	Version     *int32       `json:"version,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

type textDocumentIdentifier struct {
	URI string `json:"uri"`
}

type versionedTextDocumentIdentifier struct {
	URI     string `json:"uri"`
	Version *int32 `json:"version"`
}

type textDocumentItem struct {
	URI        string `json:"uri"`
	LanguageID string `json:"languageId"`
	Version    int32  `json:"version"`
	Text       string `json:"text"`
}

type textDocumentPositionParams struct {
	TextDocument textDocumentIdentifier `json:"textDocument"`
	Position     Position               `json:"position"`
}

// TextEdit replaces a range with new text.
type TextEdit struct {
	Range   Range  `json:"range"`
	NewText string `json:"newText"`
}

// WorkspaceEdit is a server's proposed change to many documents.
type WorkspaceEdit struct {
	Changes         map[string][]TextEdit `json:"changes,omitempty"`
	DocumentChanges []json.RawMessage     `json:"documentChanges,omitempty"`
}

// documentChange is the union of TextDocumentEdit and the file operations.
type documentChange struct {
	Kind         string                           `json:"kind,omitempty"` // create, rename, delete; "" for a text edit
	TextDocument *versionedTextDocumentIdentifier `json:"textDocument,omitempty"`
	Edits        []TextEdit                       `json:"edits,omitempty"`
	URI          string                           `json:"uri,omitempty"`
	OldURI       string                           `json:"oldUri,omitempty"`
	NewURI       string                           `json:"newUri,omitempty"`
	Options      *struct {
		Overwrite         bool `json:"overwrite,omitempty"`
		IgnoreIfExists    bool `json:"ignoreIfExists,omitempty"`
		Recursive         bool `json:"recursive,omitempty"`
		IgnoreIfNotExists bool `json:"ignoreIfNotExists,omitempty"`
	} `json:"options,omitempty"`
}

// documentSymbol is the hierarchical response to textDocument/documentSymbol;
// symbolInformation is the flat one (also workspace/symbol's).
type documentSymbol struct {
	Name           string           `json:"name"`
	Detail         string           `json:"detail,omitempty"`
	Kind           int              `json:"kind"`
	Range          Range            `json:"range"`
	SelectionRange Range            `json:"selectionRange"`
	Children       []documentSymbol `json:"children,omitempty"`
	// Set only in the flat form.
	Location      *Location `json:"location,omitempty"`
	ContainerName string    `json:"containerName,omitempty"`
}

type workspaceSymbol struct {
	Name          string          `json:"name"`
	Kind          int             `json:"kind"`
	ContainerName string          `json:"containerName,omitempty"`
	Location      json.RawMessage `json:"location"` // Location, or {uri} only
}

type codeAction struct {
	Title       string                   `json:"title"`
	Kind        string                   `json:"kind,omitempty"`
	IsPreferred bool                     `json:"isPreferred,omitempty"`
	Disabled    *struct{ Reason string } `json:"disabled,omitempty"`
	Command     json.RawMessage          `json:"command,omitempty"` // a Command, or a string for a bare Command
	Edit        *WorkspaceEdit           `json:"edit,omitempty"`
}

// serverCapabilities holds the capabilities this package consults.
type serverCapabilities struct {
	PositionEncoding       string          `json:"positionEncoding,omitempty"`
	TextDocumentSync       json.RawMessage `json:"textDocumentSync,omitempty"`
	RenameProvider         json.RawMessage `json:"renameProvider,omitempty"`
	DiagnosticProvider     json.RawMessage `json:"diagnosticProvider,omitempty"`
	ImplementationProvider json.RawMessage `json:"implementationProvider,omitempty"`
	TypeDefinitionProvider json.RawMessage `json:"typeDefinitionProvider,omitempty"`
}

// prepareRename reports whether the rename provider offers prepareRename.
func (c serverCapabilities) prepareRename() bool {
	var o struct {
		PrepareProvider bool `json:"prepareProvider"`
	}
	return json.Unmarshal(c.RenameProvider, &o) == nil && o.PrepareProvider
}

// pullDiagnostics reports whether the server supports textDocument/diagnostic.
func (c serverCapabilities) pullDiagnostics() bool {
	return len(c.DiagnosticProvider) > 0 && string(c.DiagnosticProvider) != "null" && string(c.DiagnosticProvider) != "false"
}

// wantsSave reports whether the server asked for didSave.
func (c serverCapabilities) wantsSave() bool {
	var o struct {
		Save json.RawMessage `json:"save"`
	}
	if json.Unmarshal(c.TextDocumentSync, &o) != nil {
		return false
	}
	return len(o.Save) > 0 && string(o.Save) != "false" && string(o.Save) != "null"
}

type initializeResult struct {
	Capabilities serverCapabilities `json:"capabilities"`
	ServerInfo   *struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	} `json:"serverInfo,omitempty"`
}

type progressParams struct {
	Token json.RawMessage `json:"token"`
	Value struct {
		Kind    string `json:"kind"`
		Title   string `json:"title,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"value"`
}

// symbolKinds names LSP SymbolKind values for output.
var symbolKinds = [...]string{"", "file", "module", "namespace", "package", "class", "method", "property", "field",
	"constructor", "enum", "interface", "function", "variable", "constant", "string", "number", "boolean", "array",
	"object", "key", "null", "enum member", "struct", "event", "operator", "type parameter"}

func symbolKind(k int) string {
	if k > 0 && k < len(symbolKinds) {
		return symbolKinds[k]
	}
	return "symbol"
}
