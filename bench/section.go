package bench

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// sectionName is what may stand between "bench:" and ":start"; names stay
// plain so a marker can never contain "-->" or another marker.
var sectionName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Markers returns the start and end comments that delimit section name.
func Markers(name string) (start, end string) {
	return "<!-- bench:" + name + ":start -->", "<!-- bench:" + name + ":end -->"
}

// ReplaceSection returns doc with the text between name's markers replaced
// by body (markers kept), or, when doc has no such section, doc with the
// section appended. Everything outside the markers is left byte for byte, so
// a rerun of one benchmark keeps the others' figures and any hand-written
// prose. A doc whose markers are broken (a start without an end, an end
// before its start, a section twice) is an error rather than a guess.
func ReplaceSection(doc, name, body string) (string, error) {
	if !sectionName.MatchString(name) {
		return "", fmt.Errorf("section name %q is not usable; use lower-case letters, digits, '-' and '_'", name)
	}
	start, end := Markers(name)
	body = strings.Trim(body, "\n")
	block := start + "\n" + body + "\n" + end
	ns, ne := strings.Count(doc, start), strings.Count(doc, end)
	switch {
	case ns == 0 && ne == 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + block + "\n", nil
	case ns != 1 || ne != 1:
		return "", fmt.Errorf("the document has %d %q and %d %q markers; leave exactly one pair (or none) and rerun", ns, start, ne, end)
	}
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if j < i {
		return "", fmt.Errorf("the document has %q before %q; fix the order and rerun", end, start)
	}
	return doc[:i] + block + doc[j+len(end):], nil
}

// WriteSection replaces section name of the file at path with body (see
// ReplaceSection); a missing file is created with just that section.
func WriteSection(path, name, body string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	next, err := ReplaceSection(string(doc), name, body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(next), 0o644)
}

// ReadSection returns the text between name's markers in doc, without the
// newlines next to the markers; a missing or broken section is an error.
func ReadSection(doc, name string) (string, error) {
	start, end := Markers(name)
	if ns, ne := strings.Count(doc, start), strings.Count(doc, end); ns != 1 || ne != 1 {
		return "", fmt.Errorf("the document has %d %q and %d %q markers, want one of each", ns, start, ne, end)
	}
	i, j := strings.Index(doc, start)+len(start), strings.Index(doc, end)
	if j < i {
		return "", fmt.Errorf("the document has %q before %q", end, start)
	}
	return strings.Trim(doc[i:j], "\n"), nil
}
